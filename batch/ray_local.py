"""A local Ray of the batch job's own: on loopback only, authenticated by a token of this process."""

from __future__ import annotations

import logging
import os
import secrets
from typing import Any


def local_ray_auth() -> None:
    """A token of this process's own, in the environment, for a local Ray of ours (its raylet and workers
    inherit it), unless the caller chose a mode or a token: left to itself a local `ray.init()` turns token
    authentication on and writes the token to ~/.ray/auth_token, and leaves it there. Only the token is
    set: `ray.init` still turns the mode on itself, and refreshes its configuration, which a process that
    imported Ray earlier has read already. Set once per process: Ray's token loader keeps the first token
    it read."""
    if not any(k in os.environ for k in ("RAY_AUTH_MODE", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH")):
        os.environ["RAY_AUTH_TOKEN"] = secrets.token_hex(32)


# A local Ray's one address. Ray swaps 127.0.0.1 for the machine's outward address (and so binds its
# servers on every interface) unless it runs as a machine of its own, which on Linux this switch of
# Ray's says (its default on macOS and Windows, read by `ray._private.services.get_node_ip_address`).
LOOPBACK = "127.0.0.1"
_LOCAL_ONLY = "RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"


def init_local_ray(**options: Any) -> None:
    """Start a local Ray of this process's own (`ray.init(address="local")`, `options` passed on) that
    listens on loopback only: its GCS, raylet, workers, agents and the autoscaler's metrics server on
    127.0.0.1, no dashboard, authenticated by a token of this process (`local_ray_auth`). Without this a
    local job's GCS, raylet and workers listened on every interface and the autoscaler's unauthenticated
    metrics server on 0.0.0.0:44217. A cluster (`ray.init(address=...)`) is the caller's explicit choice,
    and never goes through here."""
    import ray
    from ray._private import ray_constants

    local_ray_auth()
    saved = os.environ.get(_LOCAL_ONLY), ray_constants.ENABLE_RAY_CLUSTER
    # Ray's notice that it turned token authentication on (and how to opt out): on purpose here, with a
    # token of this process's own; a warning on every run of the batch command otherwise (issue 45).
    notice = logging.getLogger("ray._private.authentication.authentication_token_setup")
    notice_level = notice.level
    notice.setLevel(logging.ERROR)
    # The environment for Ray's processes started now (they inherit it), the flag for this one, which
    # read it when Ray was imported; both as they were afterwards, so a later `ray.init(address=...)` of
    # this process joins a cluster on its outward address as before.
    os.environ[_LOCAL_ONLY] = "0"
    ray_constants.ENABLE_RAY_CLUSTER = False
    try:
        ray.init(
            # "local": a Ray of its own, never one already running on this machine (ray.init() alone
            # joins the newest `ray start` cluster it finds, whatever its token).
            address="local",
            _node_ip_address=LOOPBACK,
            include_dashboard=False,
            log_to_driver=False,
            **options,
        )
    finally:
        notice.setLevel(notice_level)
        if saved[0] is None:
            os.environ.pop(_LOCAL_ONLY, None)
        else:
            os.environ[_LOCAL_ONLY] = saved[0]
        ray_constants.ENABLE_RAY_CLUSTER = saved[1]
