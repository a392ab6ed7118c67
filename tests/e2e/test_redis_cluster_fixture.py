"""The ``redis_cluster`` fixture gives a working Redis Cluster (tests/e2e/redis_cluster.py).

1. 3 masters and 3 replicas, every node cluster_state:ok with 16384 slots, the
   masters' slot ranges cover 0..16383 once; ``seeds`` names the 3 masters;
2. SET/GET through ``redis-cli -c`` of keys in different slots: the keys land on
   different masters (each master holds its own key, a direct GET on another
   master answers MOVED), and a binary value survives the RESP client;
3. kill_master + wait_failover: a replica becomes master of the dead one's
   slots, the cluster is ok again and every key is still readable;
4. close() leaves no redis-server process and no folder; a second close() is
   harmless.
"""

import os

import pytest

import helpers as H
import redis_cluster as RC


def key_per_master(c):
    """{master port: a key whose slot that master holds}."""
    out = {}
    for i in range(1000):
        k = "fixture:{k%d}" % i
        m = c.master_of_slot(c.keyslot(k))
        out.setdefault(m["port"], k)
        if len(out) == 3:
            return out
    raise AssertionError("no key found for every master: %r" % out)


@pytest.mark.deadline(90)
def test_cluster_works_fails_over_and_closes(redis_cluster):
    c = redis_cluster
    # 1. shape
    masters, replicas = c.masters(), c.replicas()
    assert len(masters) == 3 and len(replicas) == 3, c.nodes()
    for p in c.live_ports():
        info = c.cluster_info(p)
        assert info["cluster_state"] == "ok" and info["cluster_slots_assigned"] == "16384", info
    covered = sorted(r for m in masters for r in m["slots"])
    assert covered[0][0] == 0 and covered[-1][1] == 16383
    assert sum(hi - lo + 1 for lo, hi in covered) == 16384, covered
    assert {r["master_id"] for r in replicas} == {m["id"] for m in masters}
    assert c.seeds == "redis://" + ",".join("127.0.0.1:%d" % m["port"] for m in masters)

    # 2. keys in different slots on different masters
    kpm = key_per_master(c)
    entry = c.ports[0]
    for port, k in kpm.items():
        assert c.cli(entry, "SET", k, "v-" + k).strip() == "OK"
    for port, k in kpm.items():
        assert c.cli(entry, "GET", k).strip() == "v-" + k
        # held by that master, redirected by the others
        assert RC.resp(port, "GET", k) == ("v-" + k).encode()
        for other in kpm:
            if other != port:
                v = RC.resp(other, "GET", k)
                assert isinstance(v, RC.RedisError) and str(v).startswith("MOVED "), (other, k, v)
    blob = bytes(range(256)) * 4
    c.command("SET", "fixture:{bin}", blob)
    assert c.get("fixture:{bin}") == blob
    c.setrange("fixture:{bin}", 16, b"\xff")
    assert c.get("fixture:{bin}") == blob[:16] + b"\xff" + blob[17:]
    assert set(c.keys("fixture:*")) == set(kpm.values()) | {"fixture:{bin}"}

    # 3. failover (replication is asynchronous: until every master's replica
    # has the keys, or a kill right after the SET may lose one; WAIT on a new
    # connection would count none of the SETs, made on others)
    for port in kpm:
        c.wait_replicated(port)
    victim = masters[0]
    port = c.kill_master(0)
    assert port == victim["port"] and c.procs[port].poll() is not None
    new = c.wait_failover(timeout=30)
    assert set(victim["slots"]) <= set(new["slots"]), (victim, new)
    assert port not in [m["port"] for m in c.masters()]
    assert len(c.masters()) == 3
    for k in kpm.values():
        assert c.get(k) == ("v-" + k).encode(), k  # replicated before the kill
    assert c.cli(new["port"], "SET", "fixture:{after}", "x").strip() == "OK"

    # 4. close
    pids, dirs = c.pids(), list(c.dirs.values())
    c.close()
    for pid in pids:
        assert H.pid_gone(pid) and H.proc_state(pid) is None, "redis-server %d left behind" % pid
    assert not any(os.path.exists(d) for d in dirs)
    c.close()
