"""Prometheus metrics of one gateway node, served at `/metrics`.

- `recorded`: counters and histograms the gateway's parts add to as things happen (a job
  accepted or finished, a retry, a hang, a Redis repair), in a registry of the app's own;
- `scraped`: gauges computed at scrape time from state already held (workers, the queue's
  length, GPU telemetry, sockets), and the exposition of both.

Nothing is imported here: the parts that record import `gateway.metrics.recorded` alone,
which imports none of them.
"""
