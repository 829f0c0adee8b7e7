"""SillyTavern import and export: world info, character cards (PNG/JSON/CHARX) and chats.

Entry points: :func:`import_sillytavern` (any file, kind told by content) and the
``export_*`` functions. Import is pure (objects in, objects out); the caller writes
results into a project.
"""

from storyloom.knowledge.sillytavern.card_knowledge import card_knowledge_base
from storyloom.knowledge.sillytavern.character_preset import CharacterPreset
from storyloom.knowledge.sillytavern.chat_log import (
    ChatHeader,
    ChatLog,
    ChatMessage,
    parse_chat_jsonl,
    parse_send_date,
)
from storyloom.knowledge.sillytavern.export import (
    export_card_json,
    export_card_png,
    export_chat_jsonl,
    export_world_info,
)
from storyloom.knowledge.sillytavern.importer import (
    ImportResult,
    import_sillytavern,
    import_sillytavern_bytes,
)
from storyloom.knowledge.sillytavern.world_info import (
    character_book_to_kb,
    export_character_book,
    world_info_to_kb,
)

__all__ = [
    "CharacterPreset",
    "ChatHeader",
    "ChatLog",
    "ChatMessage",
    "ImportResult",
    "card_knowledge_base",
    "character_book_to_kb",
    "export_card_json",
    "export_card_png",
    "export_character_book",
    "export_chat_jsonl",
    "export_world_info",
    "import_sillytavern",
    "import_sillytavern_bytes",
    "parse_chat_jsonl",
    "parse_send_date",
    "world_info_to_kb",
]
