"""The one-off investigations: studies whose answers became code and a design note
(``docs/design_notes.md``); see ``python -m benchmarks list``."""
