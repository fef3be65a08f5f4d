"""The emulator's HTTP and WebSocket side, as ComfyUI's aiohttp server behaves."""
