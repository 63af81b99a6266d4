"""launch.close on a real gloo process group (one process, its store on a free local port)."""

import socket


def test_close_ends_the_process_group(monkeypatch):
    """launch.close destroys an initialized gloo group (one process here) and is a no-op without one."""
    import torch.distributed as dist

    from grpo_ext.run import launch as grpo_launch

    grpo_launch.close(completed=True)  # nothing initialized: nothing to do
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    with socket.socket() as sock:  # a free port
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    monkeypatch.setenv("MASTER_PORT", str(port))
    dist.init_process_group("gloo", rank=0, world_size=1)
    assert dist.is_initialized()
    grpo_launch.close(completed=True)
    assert not dist.is_initialized()
