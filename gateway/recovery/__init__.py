"""What breaks: leases, hangs, unresponsive workers, Redis restarts, exits."""
