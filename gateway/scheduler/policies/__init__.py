"""The placement policies other than `affinity`."""
