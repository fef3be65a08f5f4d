"""Getting a job to a worker and back: links, the dispatcher, relays, outcomes."""
