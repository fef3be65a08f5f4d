"""A protocol-faithful fake ComfyUI 0.3.64 with a calibrated cost model."""
