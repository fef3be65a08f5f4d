"""The warm-up: its prompts, and running them before a worker takes jobs."""
