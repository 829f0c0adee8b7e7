"""The workflow layer: the one runner for everything that runs (see ARCHITECTURE.md).

A workflow is a DAG of typed nodes (``workflow_file``); node types declare their slots and
config (``node_type``) and register through a pluggy hook (``node_registry``); a workflow
is checked whole before it runs (``validation``) and run by ``runner``, which caches
outputs (``node_cache``), keeps their history and frozen pins (``node_history``) and
reports what happens as the events of seed 002 (``events``). Built-in nodes live in
``nodes/``; ``workflow_tools`` exposes workflows and single nodes as agent tools.
"""
