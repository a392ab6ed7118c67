"""colabfs.prefetch and colabfs.torch.PrefetchingSampler without a mount:
prefetch against a stand-in for running the colabfs command (what it runs, the list it
hands over, what it returns and raises), the sampler with a stand-in
prefetch (each epoch's order handed over as the epoch starts, the same
order yielded, batch samplers flattened, a failing hint only warned
about), and that the package imports torch only in colabfs.torch."""

import json
import os
import subprocess
import sys
import warnings

import pytest

import colabfs
from colabfs import _cli

@pytest.fixture
def fake(monkeypatch):
    """A stand-in for running the colabfs command: answer(rc, stdout, stderr)
    sets what it answers; it returns the calls, each with the --list file's
    lines as they were when it ran."""
    calls = []

    def answer(rc=0, stdout="", stderr=""):
        def run(args, timeout=None, env=None):
            args = [os.fspath(a) for a in args]
            listed = None
            if "--list" in args:
                with open(args[args.index("--list") + 1]) as f:
                    listed = f.read().splitlines()
            calls.append({"argv": args, "list": listed})
            return rc, stdout, stderr
        monkeypatch.setattr(_cli, "run", run)
        return lambda: calls
    return answer


DONE = '{"event":"done","ok":true,"error":null,"files":3,"unknown":1,"bytes":3000}\n'


def test_prefetch_hands_the_order_over(fake, tmp_path, monkeypatch):
    calls = fake(stdout=DONE)
    monkeypatch.chdir(tmp_path)
    got = colabfs.prefetch(["/m/c/2.jpg", "/m/a/1.jpg", "rel/x.jpg", "/m/c/2.jpg"])
    assert got == {"files": 3, "unknown": 1, "bytes": 3000}
    (call,) = calls()
    assert call["argv"][:3] == ["warm", "--ordered", "--json"] and call["argv"][3] == "--list"
    assert call["list"] == ["/m/c/2.jpg", "/m/a/1.jpg", str(tmp_path / "rel/x.jpg"),
                            "/m/c/2.jpg"]  # in order, repeats kept, made absolute
    assert not os.path.exists(call["argv"][4]), "the list file was left behind"


def test_prefetch_of_nothing_runs_nothing(fake):
    calls = fake(stdout=DONE)
    assert colabfs.prefetch([]) == {"files": 0, "unknown": 0, "bytes": 0}
    assert colabfs.prefetch(["/m/a\nb"]) == {"files": 0, "unknown": 1, "bytes": 0}
    assert calls() == []


def test_prefetch_failure_is_an_error(fake):
    fake(rc=2, stdout='{"event":"done","ok":false,"error":"bad_path"}\n',
         stderr="colabfs: warm --ordered: /etc/x is not in the mount at /m\n")
    with pytest.raises(colabfs.Error, match="/etc/x is not in the mount at /m") as ei:
        colabfs.prefetch(["/m/a", "/etc/x"])
    assert ei.value.fix
    fake(rc=1, stdout="", stderr="")
    with pytest.raises(colabfs.Error, match="prefetch: failed"):
        colabfs.prefetch("/m/a")


def test_the_package_imports_torch_only_in_colabfs_torch():
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    code = "import sys, colabfs; assert 'torch' not in sys.modules, 'torch imported'"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=os.path.join(top, "python")))
    assert r.returncode == 0, r.stderr


# ---- the sampler ----------------------------------------------------------------------


def sampler_module():
    pytest.importorskip("torch", reason="torch is not installed")
    import colabfs.torch
    return colabfs.torch


def test_each_epoch_hands_its_order_as_it_starts():
    ct = sampler_module()
    import torch
    from torch.utils.data import RandomSampler

    paths = ["/m/c%d/%03d.jpg" % (i % 3, i) for i in range(50)]
    handed = []
    g = torch.Generator()
    g.manual_seed(7)
    s = ct.PrefetchingSampler(RandomSampler(range(50), generator=g), paths,
                              prefetch=lambda p: handed.append(list(p)) or {"files": len(p)})
    assert len(s) == 50 and handed == []
    epochs = []
    for _ in range(2):
        it = iter(s)
        assert len(handed) == len(epochs) + 1, "not handed over as the epoch started"
        epochs.append(list(it))
    for order, hint in zip(epochs, handed):
        assert sorted(order) == list(range(50))
        assert hint == [paths[i] for i in order]  # the order the workers will read
    assert epochs[0] != epochs[1] and s.last == {"files": 50}


def test_a_batch_sampler_is_flattened():
    ct = sampler_module()
    from torch.utils.data import BatchSampler, SequentialSampler

    paths = ["/m/%d" % i for i in range(10)]
    handed = []
    s = ct.PrefetchingSampler(BatchSampler(SequentialSampler(range(10)), 4, False), paths,
                              prefetch=handed.append)
    assert list(s) == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
    assert handed == [paths]


def test_a_hint_the_mount_refuses_only_warns_once():
    ct = sampler_module()

    def refuse(p):
        raise colabfs.Error("prefetch: /tmp/x is not in a colabfs mount")
    s = ct.PrefetchingSampler(range(5), ["/tmp/x%d" % i for i in range(5)], prefetch=refuse)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert list(s) == [0, 1, 2, 3, 4]
        assert list(s) == [0, 1, 2, 3, 4]
    assert len(w) == 1 and "not handed to the mount" in str(w[0].message)
