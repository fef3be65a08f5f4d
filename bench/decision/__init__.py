"""Decision cost: seconds of one `policy.assign(snapshot)` against the queue, farm and catalogue.

Snapshots are built as the dispatcher builds them (`queue.group_jobs`, the heads in queue
order, every worker with its speeds, load seconds and residency as the simulator's
`worker_view` gives them) in two cases: a fresh burst (every job just arrived, every worker
idle) and steady state (one worker has just freed a slot, the others run one job and hold one
prefetched). Policies come from the registry by name, so whatever `affinity` is gets timed.

    python -m bench.decision [--quick] [--policies affinity,swarm_like] [--out bench/results]

`snapshots` builds what the policy sees, `timing` times the calls, `report` writes the table
and the plot.
"""
