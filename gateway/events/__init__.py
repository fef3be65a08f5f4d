"""Events bound for clients: the wire frames and their fan-out between nodes."""
