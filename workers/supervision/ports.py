"""Free loopback ports for child processes."""

import socket


def free_port(host: str = "127.0.0.1") -> int:
    """Return a TCP port that was free on `host` a moment ago."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        port: int = sock.getsockname()[1]
        return port
