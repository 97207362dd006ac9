"""``ray start --address=127.0.0.1:PORT ...`` for the executor tests' second Ray node, kept on loopback.

Ray turns 127.0.0.1 (``--node-ip-address``, and the head's address) into the machine's network
address unless ``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``; with that set, a node exactly at 127.0.0.1
binds every server to 127.0.0.1, but ``ray start --address`` refuses to add a node to a cluster
("Multi-node Ray clusters are not supported on Windows and OSX"). The head node and the test's
driver run with the variable set; this runs ``ray start`` for the second node with the refusal
lifted in this process only, its own address lookup answering 127.0.0.1. The node's processes
(raylet, agents, task workers) inherit the variable, so none of them looks the address up.

Run as ``python ray_loopback_node.py start ...`` (the ``ray`` command's arguments).
"""

from __future__ import annotations

import sys

import ray._private.ray_constants as ray_constants
from ray._private import services
from ray.scripts.scripts import main

LOOPBACK = "127.0.0.1"


def _loopback(address: str | None = None) -> str:
    return LOOPBACK


if __name__ == "__main__":
    ray_constants.ENABLE_RAY_CLUSTER = True  # lets `ray start --address` add this node
    services.get_node_ip_address = _loopback  # ...without turning 127.0.0.1 into the machine's address
    sys.exit(main())
