"""This node and its peers: the gateway nodes that share one Redis.

Each node registers itself (`registry`) with a heartbeat: its URL for node-to-node requests,
its workers with their state, what the placement policy sees of them (`lanes`) and their
catalogue. From the registrations of the live nodes every node validates prompts against the
whole farm, places jobs with every worker in view, reaches the node that holds a file or runs
a prompt (`client`), and puts back in the queue the jobs of a node that lapsed (`takeover`).
"""
