"""comfy-gateway: one ComfyUI-compatible endpoint in front of a farm of ComfyUI instances."""

__version__ = "0.1.0"
