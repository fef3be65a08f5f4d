"""The scorecard: ours (`affinity`) against every baseline, simulated, on a grid of regimes
(arrival shapes x farms x catalogue sizes x cache modes), each cell judged against the goals of
issue 9.

    python -m bench.scorecard [--quick|--full] [--seeds N] [--processes 2]

`grid` names the cells, `runner` simulates every policy on them, `goals` compares ours with the
best baseline of each cell, `report` writes the tables and the plot.
"""
