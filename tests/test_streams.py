"""Every op runs where its tensors live and on the caller's stream: a side stream (checked in the profiler's
trace), CUDA graph capture and replay, and tensors on cuda:1 while cuda:0 is current (two GPUs)."""

import pytest
import torch

from jitload import kernels


@pytest.fixture(scope="module")
def ops(all_kernels):
    return torch.ops.jitload


def test_every_kernel_has_a_case():
    # the cases below are written per op (the thunks are not called here): a new kernel folder must get one
    names = {name for name, _thunk, _expected in _calls(None, "cpu")}
    assert set(kernels.names()) <= names, set(kernels.names()) - names


def _calls(ops, device):
    """(name, thunk, expected) for every op on fresh inputs on device."""
    g = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(64, 4096, device=device, generator=g)
    y = torch.randn(64, 4096, device=device, generator=g)
    b = torch.randn(4096, device=device, generator=g)
    w = 1 + 0.1 * torch.randn(4096, device=device, generator=g)
    r = x + y
    rms = r * torch.rsqrt(r.pow(2).mean(-1, keepdim=True) + 1e-6) * w
    return [
        ("add", lambda: ops.add(x, y), x + y),
        ("add_relu", lambda: ops.add_relu(x, y), (x + y).relu()),
        ("add_relu_backward", lambda: ops.add_relu_backward(b.expand_as(x).contiguous(), x, y),
         b * ((x + y) > 0)),
        ("bias_gelu", lambda: ops.bias_gelu(x, b), torch.nn.functional.gelu(x + b)),
        ("rmsnorm", lambda: ops.rmsnorm(x, y, w)[0], rms),
        ("softmax", lambda: ops.softmax(x), torch.softmax(x, -1)),
    ]


@pytest.mark.cuda
def test_side_stream_without_extra_sync(ops):
    calls = _calls(ops, "cuda")
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())  # inputs were made on the default stream
    marker = torch.randn(1 << 10, device="cuda")
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        marker.mul_(2)  # a torch kernel on the default stream, to tell the streams apart in the trace
        with torch.cuda.stream(side):
            outs = [(name, fn(), expected) for name, fn, expected in calls]
            # read back on the side stream itself: right only if the kernels ran on it
            ok = [(name, torch.allclose(out, expected, rtol=1e-4, atol=1e-5)) for name, out, expected in outs]
        side.synchronize()
    assert all(flag for _, flag in ok), ok
    events = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
                    key=lambda e: e.time_range.start)
    kernels_seen = [(e.name, getattr(e, "device_resource_id", None)) for e in events]
    ours = {s for n, s in kernels_seen if any(k in n for k in ("add_relu", "map_vec", "bias_gelu", "rmsnorm_kernel",
                                                               "softmax_kernel"))}
    default = kernels_seen[0][1]  # the marker, the first kernel in the trace
    print("stream ids: jitload kernels", ours, "the default stream (marker kernel)", default)
    assert len(ours) == 1 and None not in ours, kernels_seen
    assert default is not None and default not in ours, kernels_seen


@pytest.mark.cuda
def test_cuda_graph_capture_and_replay(ops):
    x = torch.randn(64, 4096, device="cuda")
    y = torch.randn(64, 4096, device="cuda")
    b = torch.randn(4096, device="cuda")
    w = torch.ones(4096, device="cuda")

    def step():
        h = ops.bias_gelu(ops.add_relu(x, y), b)
        out, _ = ops.rmsnorm(h, x, w)
        return ops.softmax(out)

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        step()  # warm-up outside capture, as torch's docs ask
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = step()
    for _ in range(2):
        x.copy_(torch.randn_like(x))  # new data in the same buffers: the replay must see it
        graph.replay()
        torch.cuda.synchronize()
        torch.testing.assert_close(captured, step())


@pytest.mark.cuda
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_tensors_on_the_second_gpu(ops):
    torch.cuda.set_device(0)
    for name, fn, expected in _calls(ops, "cuda:1"):
        out = fn()
        assert out.device == torch.device("cuda:1"), name
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-5, msg=name)
    assert torch.cuda.current_device() == 0
