#!/usr/bin/env python3
"""Host check of the fp8 decode kernel's pipeline accounting (src/ops/cuda/sm90/decode_fp8/kernel.cuh).

Simulates cp.async commit groups and wait_group, the KV stages and the Q tiles (the 16-row ring with late
refill; the wide tiles' single Q tile) over random parts (sequences of 1..20 pages), and asserts that every
step finds its page and Q tile complete, and that no stage or Q slot is overwritten before it is consumed.
Run: python3 scripts/check_fp8_decode_pipeline.py (no GPU).
"""
import random
def sim(seq_pages, S, ring, late):
    QT = S + 1 if ring else 1
    items = [(n, k) for n, cnt in enumerate(seq_pages) for k in range(cnt)]  # (sequence ordinal, block)
    groups = []          # list of lists of ("page", idx) / ("q", seq)
    done = set()
    stage_of = {}        # stage -> page idx occupying it (being written or holding)
    qslot = {}           # slot -> seq
    qregs_loaded = set()
    state = dict(load=0, load_last=-1, load_seq=-1)
    def commit(g): groups.append(g)
    def wait(N):
        for g in groups[:len(groups) - N] if N > 0 else groups:
            for it in g: done.add(it)
    def issue_page(stage, cur_step):
        i = state['load']
        g = []
        n, blk = items[i]
        if ring and n != state['load_last']:
            state['load_seq'] += 1; state['load_last'] = n
            slot = state['load_seq'] % QT
            old = qslot.get(slot)
            assert old is None or old in qregs_loaded, ("Q slot overwritten before use", old, n)
            qslot[slot] = n; g.append(("q", n))
        old = stage_of.get(stage)
        assert old is None or old < cur_step, ("stage overwritten before consumed", old, cur_step)
        stage_of[stage] = i; g.append(("page", i))
        state['load'] += 1
        return g
    # prologue
    if not ring:
        commit([("q", 0)]); qslot[0] = 0
    for s in range(S):
        commit(issue_page(s, -1) if state['load'] < len(items) else [])
    j = 0; stage = 0; prev = 0; first = True; q_behind = False; comp_seq = 0
    while j < len(items):
        if late and not first: wait(S - 2)
        elif q_behind: wait(1)
        else: wait(S - 1)
        q_behind = False
        # barrier: now everything from step j-1 consumed
        if late and not first:
            commit(issue_page(prev, j) if state['load'] < len(items) else [])
        first = False
        assert ("page", j) in done, ("page not complete", j)
        assert stage_of[stage] == j
        n, blk = items[j]
        if blk == 0 or j == 0:
            if ring:
                assert ("q", n) in done and qslot[comp_seq % QT] == n, ("Q not ready", n)
            else:
                assert ("q", n) in done and qslot[0] == n
            qregs_loaded.add(n)
        seg_end = j + 1 == len(items) or items[j + 1][0] != n
        if seg_end: comp_seq += 1
        if not late:
            # end barrier: step j consumed
            if seg_end and j + 1 < len(items):
                commit([("q", items[j + 1][0])]); qslot[0] = items[j + 1][0]; q_behind = True
            commit(issue_page(stage, j + 1) if state['load'] < len(items) else [])
        prev = stage; stage = (stage + 1) % S; j += 1
random.seed(3)
for trial in range(3000):
    seqs = [random.choice([1, 1, 1, 2, 3, 8, random.randint(1, 20)]) for _ in range(random.randint(1, 12))]
    sim(seqs, 4, True, True)
    sim(seqs, 3, False, False)
    sim(seqs, 4, False, False)
print("pipeline accounting OK")
