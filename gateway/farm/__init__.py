"""This node among its peers: wiring, registry, operations, draining, catalogue."""
