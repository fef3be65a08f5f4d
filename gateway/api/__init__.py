"""HTTP and WebSocket routes: ComfyUI's (also under /api) and the gateway's own."""
