"""Running prompts, message for message as ComfyUI's PromptExecutor."""
