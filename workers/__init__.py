"""Everything about one ComfyUI instance: its client, its process, its emulator.

`workers` never imports `gateway`.
"""
