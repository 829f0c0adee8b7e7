"""The seccomp filter every sandboxed program runs under, as the BPF bwrap loads.

bwrap installs it (``--seccomp FD``) right before it execs the launcher, so the filter
covers the launcher, the program and everything they start, and nothing can remove it.
What it refuses, and why:

- the kernel keyring (``keyctl``, ``add_key``, ``request_key``): keyrings have no
  namespace, and the session and user keyrings of whoever started storyloom would
  otherwise be read and written from inside;
- what Docker's and Flatpak's default profiles refuse: loading kernel modules and
  kexec, ``bpf``, ``perf_event_open``, ``userfaultfd``, ``io_uring``, ``ptrace`` and
  ``process_vm_*``, ``kcmp``, mounting and namespaces (``mount``, the new mount API,
  ``pivot_root``, ``unshare``, ``setns``), handles that walk past mounts
  (``open_by_handle_at``), clock, swap, quota, reboot, ``acct``, ``syslog``,
  ``lookup_dcookie``, NUMA policy and page moves, and ``personality`` except the values
  a program queries or sets harmlessly;
- memory no per-process limit counts: ``memfd_create``, ``memfd_secret`` and SysV shared
  memory (``shmget`` and friends); ``/dev/shm`` is a small tmpfs instead;
- ``clone3``, whose flags sit in memory a filter cannot read: it answers ENOSYS, and the
  C library falls back to ``clone``;
- every other ABI: a 32-bit syscall on x86_64 (``int 0x80``) kills the process, an x32
  one answers ENOSYS, so no syscall number reaches the kernel unchecked.

A refused call fails with EPERM (ENOSYS where said), so a program sees an ordinary
error. The filter is built here, by hand, because it is a short list and libseccomp's
Python binding is not a wheel; the syscall numbers are the kernel's
(``asm/unistd_64.h`` on x86_64, ``asm-generic/unistd.h`` on aarch64).
"""

from __future__ import annotations

import errno
import functools
import platform
import struct
from dataclasses import dataclass

# classic BPF opcodes (linux/filter.h) and seccomp's return values (linux/seccomp.h)
BPF_LD_W_ABS = 0x20
BPF_JEQ_K = 0x15
BPF_JGE_K = 0x35
BPF_RET_K = 0x06
RET_KILL_PROCESS = 0x80000000
RET_ERRNO = 0x00050000
RET_ALLOW = 0x7FFF0000

# offsets in struct seccomp_data
NR_OFFSET = 0
ARCH_OFFSET = 4
ARG0_LOW_OFFSET = 16

X32_SYSCALL_BIT = 0x40000000
PERSONALITY_ALLOWED = (0x0, 0x0008, 0x20000, 0x20008, 0xFFFFFFFF)
"""Docker's list: PER_LINUX, PER_LINUX32, UNAME26, PER_LINUX32|UNAME26 and the query
0xffffffff (never ADDR_NO_RANDOMIZE or READ_IMPLIES_EXEC)."""

DENIED = (
    "acct",
    "add_key",
    "bpf",
    "clock_adjtime",
    "clock_settime",
    "create_module",
    "delete_module",
    "finit_module",
    "fsconfig",
    "fsmount",
    "fsopen",
    "get_kernel_syms",
    "get_mempolicy",
    "init_module",
    "io_uring_enter",
    "io_uring_register",
    "io_uring_setup",
    "ioperm",
    "iopl",
    "kcmp",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "lookup_dcookie",
    "mbind",
    "memfd_create",
    "memfd_secret",
    "mount",
    "mount_setattr",
    "move_mount",
    "move_pages",
    "name_to_handle_at",
    "nfsservctl",
    "open_by_handle_at",
    "open_tree",
    "perf_event_open",
    "pivot_root",
    "process_vm_readv",
    "process_vm_writev",
    "ptrace",
    "query_module",
    "quotactl",
    "quotactl_fd",
    "reboot",
    "request_key",
    "set_mempolicy",
    "setns",
    "settimeofday",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "swapoff",
    "swapon",
    "syslog",
    "sysfs",
    "_sysctl",
    "umount2",
    "unshare",
    "uselib",
    "userfaultfd",
    "ustat",
)
"""The syscalls refused with EPERM (those an architecture lacks are simply absent)."""


@dataclass(frozen=True)
class Arch:
    """One architecture: its audit number and its syscall numbers."""

    name: str
    audit: int
    numbers: dict[str, int]
    x32_bit: bool


X86_64 = Arch(
    "x86_64",
    0xC000003E,
    {
        "acct": 163,
        "add_key": 248,
        "bpf": 321,
        "clock_adjtime": 305,
        "clock_settime": 227,
        "clone3": 435,
        "create_module": 174,
        "delete_module": 176,
        "finit_module": 313,
        "fsconfig": 431,
        "fsmount": 432,
        "fsopen": 430,
        "get_kernel_syms": 177,
        "get_mempolicy": 239,
        "init_module": 175,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "io_uring_setup": 425,
        "ioperm": 173,
        "iopl": 172,
        "kcmp": 312,
        "kexec_file_load": 320,
        "kexec_load": 246,
        "keyctl": 250,
        "lookup_dcookie": 212,
        "mbind": 237,
        "memfd_create": 319,
        "memfd_secret": 447,
        "mount": 165,
        "mount_setattr": 442,
        "move_mount": 429,
        "move_pages": 279,
        "name_to_handle_at": 303,
        "nfsservctl": 180,
        "open_by_handle_at": 304,
        "open_tree": 428,
        "perf_event_open": 298,
        "personality": 135,
        "pivot_root": 155,
        "process_vm_readv": 310,
        "process_vm_writev": 311,
        "ptrace": 101,
        "query_module": 178,
        "quotactl": 179,
        "quotactl_fd": 443,
        "reboot": 169,
        "request_key": 249,
        "set_mempolicy": 238,
        "setns": 308,
        "settimeofday": 164,
        "shmat": 30,
        "shmctl": 31,
        "shmdt": 67,
        "shmget": 29,
        "swapoff": 168,
        "swapon": 167,
        "syslog": 103,
        "sysfs": 139,
        "_sysctl": 156,
        "umount2": 166,
        "unshare": 272,
        "uselib": 134,
        "userfaultfd": 323,
        "ustat": 136,
    },
    x32_bit=True,
)

AARCH64 = Arch(
    "aarch64",
    0xC00000B7,
    {
        "acct": 89,
        "add_key": 217,
        "bpf": 280,
        "clock_adjtime": 266,
        "clock_settime": 112,
        "clone3": 435,
        "delete_module": 106,
        "finit_module": 273,
        "fsconfig": 431,
        "fsmount": 432,
        "fsopen": 430,
        "get_mempolicy": 236,
        "init_module": 105,
        "io_uring_enter": 426,
        "io_uring_register": 427,
        "io_uring_setup": 425,
        "kcmp": 272,
        "kexec_file_load": 294,
        "kexec_load": 104,
        "keyctl": 219,
        "lookup_dcookie": 18,
        "mbind": 235,
        "memfd_create": 279,
        "memfd_secret": 447,
        "mount": 40,
        "mount_setattr": 442,
        "move_mount": 429,
        "move_pages": 239,
        "name_to_handle_at": 264,
        "nfsservctl": 42,
        "open_by_handle_at": 265,
        "open_tree": 428,
        "perf_event_open": 241,
        "personality": 92,
        "pivot_root": 41,
        "process_vm_readv": 270,
        "process_vm_writev": 271,
        "ptrace": 117,
        "quotactl": 60,
        "quotactl_fd": 443,
        "reboot": 142,
        "request_key": 218,
        "set_mempolicy": 237,
        "setns": 268,
        "settimeofday": 170,
        "shmat": 196,
        "shmctl": 195,
        "shmdt": 197,
        "shmget": 194,
        "swapoff": 225,
        "swapon": 224,
        "syslog": 116,
        "umount2": 39,
        "unshare": 97,
        "userfaultfd": 282,
    },
    x32_bit=False,
)

ARCHES = {"x86_64": X86_64, "amd64": X86_64, "aarch64": AARCH64, "arm64": AARCH64}


class _Program:
    """A classic-BPF program under construction, with forward jumps to labels."""

    def __init__(self) -> None:
        self.code: list[tuple[int, int, int, int]] = []
        self.labels: dict[str, int] = {}
        self.fixups: list[tuple[int, str]] = []

    def load(self, offset: int) -> None:
        self.code.append((BPF_LD_W_ABS, 0, 0, offset))

    def ret(self, value: int) -> None:
        self.code.append((BPF_RET_K, 0, 0, value))

    def jump_if(self, opcode: int, value: int, label: str) -> None:
        """Go to ``label`` when the accumulator compares true, else to the next one."""
        self.fixups.append((len(self.code), label))
        self.code.append((opcode, 0, 0, value))

    def label(self, name: str) -> None:
        self.labels[name] = len(self.code)

    def assemble(self) -> bytes:
        code = list(self.code)
        for index, label in self.fixups:
            opcode, _, jf, k = code[index]
            offset = self.labels[label] - index - 1
            assert 0 <= offset <= 255, f"seccomp jump to {label} out of range"
            code[index] = (opcode, offset, jf, k)
        return b"".join(struct.pack("=HBBI", *instruction) for instruction in code)


def build_filter(arch: Arch) -> bytes:
    """The filter for ``arch`` as ``struct sock_filter`` array bytes (what bwrap reads)."""
    deny = RET_ERRNO | errno.EPERM
    program = _Program()
    program.load(ARCH_OFFSET)
    program.jump_if(BPF_JEQ_K, arch.audit, "native")
    program.ret(RET_KILL_PROCESS)
    program.label("native")
    program.load(NR_OFFSET)
    if arch.x32_bit:
        program.jump_if(BPF_JGE_K, X32_SYSCALL_BIT, "nosys")
    for name in DENIED:
        if name in arch.numbers:
            program.jump_if(BPF_JEQ_K, arch.numbers[name], "deny")
    program.jump_if(BPF_JEQ_K, arch.numbers["clone3"], "nosys")
    program.jump_if(BPF_JEQ_K, arch.numbers["personality"], "personality")
    program.ret(RET_ALLOW)
    program.label("personality")
    program.load(ARG0_LOW_OFFSET)
    for value in PERSONALITY_ALLOWED:
        program.jump_if(BPF_JEQ_K, value, "allow")
    program.label("deny")
    program.ret(deny)
    program.label("nosys")
    program.ret(RET_ERRNO | errno.ENOSYS)
    program.label("allow")
    program.ret(RET_ALLOW)
    return program.assemble()


def host_arch() -> Arch | None:
    """This machine's architecture, or ``None`` where storyloom has no filter for it."""
    return ARCHES.get(platform.machine().lower())


@functools.cache
def sandbox_filter() -> bytes | None:
    """The filter for this machine, built once; ``None`` on an architecture without one."""
    arch = host_arch()
    return None if arch is None else build_filter(arch)
