"""Heavy hitters: bayesldp's PEM and SFP against pure-ldp 1.2.0's PEM and SFP, same populations.

Populations (every item is an ASCII string both packages accept as it is):

* ``zipf20`` / ``zipf32``: n users drawn from Zipf(s) over ``2^20`` / ``2^32`` items (rank r has
  weight ``r^-s``; ranks up to ``2^20`` drawn exactly, the tail beyond from the continuous
  ``x^-s`` law, which only adds noise items).  Rank ``r`` is labelled by a fixed bijection of
  ``0..2^b - 1`` (odd multiplier, xorshift, odd multiplier), written as ``b/4`` lowercase hex
  digits (5 or 8): labels spread uniformly, so no package gains from heavy items sharing a
  prefix.  Alphabet: the 16 hex digits.
* ``words``: n users drawn from the English "large" word list that the ``wordfreq`` package
  (3.1.1, from PyPI, data shipped in the wheel) holds, restricted to words of 1..6 lowercase
  ASCII letters and renormalised (the share of the list's mass they hold is in the results).
  Alphabet: a..z.

The truth is the population itself (the drawn users): the true top-k are its k most frequent
items (ties broken by the item string), the true frequency of an item its share of the n users.

Methods (the layouts are stated in the results file):

* bayesldp ``PEM(eps, k, eta=4, holdout=0)`` (the paper's protocol, as pure-ldp's; SFP too) with
  its code chosen by the rule of ``PEM``'s docstring (:func:`pem_code`): the positional code
  ``PositionalEncoder(alphabet, L)`` where the items have one length ``L`` and ``ceil(L log2
  |alphabet|) <= 24`` bits (zipf20: 5 hex digits, 20 bits, 4 rounds; its codes are the items,
  decoded with no dictionary), else the keyed hash of 24 bits (zipf32: 32 bits do not fit OLH's 30;
  words: 1 to 6 letters; 5 rounds for k = 10, 20, 50), whose codes are named by looking them up
  among the population's distinct items (``ItemEncoder.decode``).  Naming is timed with the server;
  a code naming none is a false positive of its own, true frequency 0.  ``SFP(eps, k, max_length=L,
  fragment_length=1, hash_bits=8, alphabet, m=1024, k_hash=32)``, defaults otherwise (``2 k``
  fragments kept per position, 20 % word users).  ``TreeHist(eps)`` with its defaults and PEM's
  code (24 levels with the hash, 20 on zipf20), shown alone: pure-ldp's TreeHist is not part of the
  comparison.
* pure-ldp ``PEMClient/PEMServer`` and ``SFPClient/SFPServer`` with its count-mean sketch
  (``CMSClient/CMSServer``, m = 1024, k = 32: the oracle and sketch of pure-ldp's own
  heavy-hitter experiments, ``pure_ldp/simulations/paper_experiments.py``); its default OLH
  server (``LHServer``) tallies each report by hashing every value of the domain (``2^32`` per
  report in the last round here), which cannot run at these sizes.  PEM: ``fragment_length = 1``
  character per round, ``start_length = L - 5`` so that it has 5 rounds like ours, top-k kept per
  round (its rule); one set of reports serves k = 10, 20, 50.  SFP: ``fragment_length = 1``,
  ``eps / 2`` for the fragment and ``eps / 2`` for the word (each user sends both, its design),
  top-k fragments per position; it returns every assembled candidate, of which the k with the
  largest estimates are taken.  Its estimates are counts: divided by n.

Metrics per cell (mean and standard deviation over the seeds): with ``F`` the first ``k``
distinct items of the returned list (largest estimate first) and ``T`` the true top-k,

* precision ``|F & T| / |F|`` (0 when nothing is returned) and recall ``|F & T| / k``;
* NCR, normalised cumulative rank (Wang, Li, Jha, IEEE TDSC 2019, section 7): the true
  top-k item of rank ``i`` (1 = most frequent) scores ``k + 1 - i``, every other item 0; NCR is
  the sum of the scores of the items in ``F`` over ``k (k + 1) / 2``;
* MSE of the estimated frequencies of the items in ``F`` against their true frequencies (0 for
  an item nobody holds);
* throughput: n / (client + server seconds), wall clock (``time.perf_counter``) and process CPU
  (``time.process_time``), measured on the whole population (client: encode and perturb every
  user, plus for pure-ldp its per-user ``aggregate``; server: the search, and for ours naming
  the codes).  Goal: ours at least as good in every accuracy cell, and 20x the throughput.

Usage::

    python benchmarks/heavy_hitters.py            # full grid, writes results/heavy_hitters.md
    python benchmarks/heavy_hitters.py --quick    # smoke run, writes nothing unless --out
"""

from __future__ import annotations

import argparse
import datetime as _dt
import gc
import math
import os
import random
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from heavy_hitters_tables import GOAL, Cell, pair_table, single_table, split_table, verdict_rule
from throughput import check_xxhash, import_pure_ldp_oracles, machine_info

SEED = 20261127
ZIPF_S = 1.0
EXACT_RANKS = 1 << 20
HEX = "0123456789abcdef"
LETTERS = "abcdefghijklmnopqrstuvwxyz"
WORD_LENGTH = 6
PEM_ROUNDS = 5
CMS_M, CMS_K = 1024, 32
#: users of the untimed warm-up run of each of ours' methods (``warm_up``)
WARM_N = 2_000
#: and their eps: at eps 1 SFP finds nothing among 2,000 users even of 4 items
WARM_EPS = 4.0
POPULATIONS = ("zipf20", "zipf32", "words")
ROOT = Path(__file__).resolve().parent.parent
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "heavy_hitters.md"


# ---------------------------------------------------------------------- populations
@dataclass(frozen=True)
class Population:
    name: str
    items: np.ndarray  # (n,) object array of str
    alphabet: str
    length: int  # longest item, characters
    note: str
    fixed: bool  # every item has ``length`` characters
    ranked: list[str] = field(repr=False)  # distinct items, most frequent first
    freq: dict[str, float] = field(repr=False)

    def top(self, k: int) -> list[str]:
        return self.ranked[:k]


def _label(rank: np.ndarray, b: int) -> np.ndarray:
    """A fixed bijection of ``0..2^b - 1`` (b even): odd multiplier, xorshift, odd multiplier."""
    mask = np.uint64((1 << b) - 1)
    with np.errstate(over="ignore"):
        x = (rank.astype(np.uint64) * np.uint64(0x9E3779B97F4A7C15) + np.uint64(12345)) & mask
        x ^= x >> np.uint64(b // 2 + 1)
        x = (x * np.uint64(0xBF58476D1CE4E5B9)) & mask
    return x


def zipf_ranks(bits: int, n: int, s: float, rng: np.random.Generator) -> np.ndarray:
    """n ranks (1-based) of Zipf(s) over 2^bits items; exact up to 2^20, continuous beyond."""
    size = 1 << bits
    head = min(size, EXACT_RANKS)
    w = np.arange(1, head + 1, dtype=float) ** -s
    lo, hi = head + 0.5, size + 0.5
    if size == head:
        tail = 0.0
    elif s == 1.0:
        tail = math.log(hi / lo)
    else:
        tail = (hi ** (1 - s) - lo ** (1 - s)) / (1 - s)
    in_head = rng.random(n) < w.sum() / (w.sum() + tail)
    ranks = np.empty(n, dtype=np.int64)
    ranks[in_head] = rng.choice(head, size=int(in_head.sum()), p=w / w.sum()) + 1
    v = rng.random(int((~in_head).sum()))
    if s == 1.0:
        x = lo * (hi / lo) ** v
    else:
        x = (lo ** (1 - s) + v * (hi ** (1 - s) - lo ** (1 - s))) ** (1 / (1 - s))
    ranks[~in_head] = np.clip(np.floor(x + 0.5), head + 1, size).astype(np.int64)
    return ranks


def _finish(name: str, items: np.ndarray, alphabet: str, length: int, note: str) -> Population:
    uniq, counts = np.unique(items, return_counts=True)
    order = np.lexsort((uniq, -counts))
    ranked = [str(uniq[i]) for i in order]
    n = items.size
    freq = {str(u): c / n for u, c in zip(uniq, counts, strict=True)}
    fixed = bool(np.all(np.char.str_len(uniq.astype(str)) == length))
    return Population(name, items, alphabet, length, note, fixed, ranked, freq)


def zipf_population(bits: int, n: int, seed: int) -> Population:
    rng = np.random.default_rng([SEED, bits, seed])
    ranks = zipf_ranks(bits, n, ZIPF_S, rng)
    uniq, inverse = np.unique(ranks, return_inverse=True)
    width = bits // 4
    labels = np.array([format(int(x), f"0{width}x") for x in _label(uniq - 1, bits)], dtype=object)
    note = f"Zipf({ZIPF_S:g}) over 2^{bits} items, {width} hex digits"
    return _finish(f"zipf{bits}", labels[inverse], HEX, width, note)


_WORDS: tuple[np.ndarray, np.ndarray, float] | None = None


def word_list() -> tuple[np.ndarray, np.ndarray, float]:
    """wordfreq's English 'large' list: words of 1..6 letters a-z, their shares, their mass."""
    global _WORDS
    if _WORDS is None:
        import wordfreq

        table = wordfreq.get_frequency_dict("en", wordlist="large")
        pattern = re.compile(f"[a-z]{{1,{WORD_LENGTH}}}")
        kept = sorted((w, f) for w, f in table.items() if pattern.fullmatch(w))
        words = np.array([w for w, _ in kept], dtype=object)
        f = np.array([f for _, f in kept])
        _WORDS = words, f / f.sum(), float(f.sum() / sum(table.values()))
    return _WORDS


def words_population(n: int, seed: int) -> Population:
    import importlib.metadata

    words, p, mass = word_list()
    rng = np.random.default_rng([SEED, 0, seed])
    items = words[rng.choice(words.size, size=n, p=p)]
    version = importlib.metadata.version("wordfreq")
    note = (f"wordfreq {version} English 'large' list, the {words.size:,} words of "
            f"1-{WORD_LENGTH} letters a-z ({mass:.1%} of its mass)")  # fmt: skip
    return _finish("words", items, LETTERS, WORD_LENGTH, note)


def population(name: str, n: int, seed: int) -> Population:
    if name == "words":
        return words_population(n, seed)
    return zipf_population(int(name[4:]), n, seed)


# ---------------------------------------------------------------------- metrics
@dataclass
class Run:
    """One method on one population: the returned list and the clock."""

    items: list[str | None]
    freqs: list[float]
    client: float  # wall seconds
    server: float
    cpu: float  # process seconds, client + server

    def scores(self, pop: Population, k: int) -> dict[str, float]:
        seen: set[Any] = set()
        found: list[tuple[Any, float]] = []
        for item, f in zip(self.items, self.freqs, strict=True):
            if item in seen:
                continue
            seen.add(item)
            found.append((item, f))
            if len(found) == k:
                break
        truth = {item: k - i for i, item in enumerate(pop.top(k))}  # NCR scores k..1
        hits = sum(item in truth for item, _ in found)
        errors = [(f - pop.freq.get(item, 0.0)) ** 2 for item, f in found]
        n = pop.items.size
        return {
            "precision": hits / len(found) if found else 0.0,
            "recall": hits / k,
            "ncr": sum(truth.get(item, 0) for item, _ in found) / (k * (k + 1) / 2),
            "mse": float(np.mean(errors)) if errors else math.nan,
            "rate": n / (self.client + self.server),
            "rate_cpu": n / self.cpu,
            "client": self.client,
            "server": self.server,
        }


class Clock:
    def __init__(self) -> None:
        gc.collect()
        self.t, self.c = time.perf_counter(), time.process_time()

    def lap(self) -> float:
        t = time.perf_counter()
        out, self.t = t - self.t, t
        return out

    def cpu(self) -> float:
        return time.process_time() - self.c


# ---------------------------------------------------------------------- bayesldp
def pem_code(pop: Population) -> dict[str, Any]:
    """PEM's (and TreeHist's) code by the rule of ``PEM``'s docstring: the positional code when
    every item has ``pop.length`` symbols of ``pop.alphabet`` and that takes at most the hash
    code's 24 bits, else the 24-bit keyed hash (keyword arguments of ``PEM``)."""
    from bayesldp.heavy_hitters import PositionalEncoder
    from bayesldp.heavy_hitters.encoding import DEFAULT_BITS

    if pop.fixed and (len(pop.alphabet) ** pop.length - 1).bit_length() <= DEFAULT_BITS:
        return {"encoder": PositionalEncoder(pop.alphabet, pop.length)}
    return {"bits": DEFAULT_BITS}


def code_note(pop: Population) -> str:
    """The rule's choice for ``pop``, in words (the results header)."""
    code = pem_code(pop)
    if "encoder" in code:
        enc = code["encoder"]
        return (f"the positional code `PositionalEncoder({pop.alphabet!r}, {pop.length})`, "
                f"{enc.bits} bits ({pop.length} symbols of {len(pop.alphabet)})")  # fmt: skip
    why = (f"{(len(pop.alphabet) ** pop.length - 1).bit_length()} bits positional, more than 24"
           if pop.fixed else f"items of 1 to {pop.length} symbols")  # fmt: skip
    return f"the 24-bit keyed hash ({why})"


def named(encoder: Any, codes: np.ndarray, pop: Population) -> list[str]:
    """The item behind each found code: a positional code's own item (no dictionary), a hash
    code's looked up among the population's distinct items; a code that names none stays
    ``code 0x...`` (a false positive of its own: no two merge)."""
    items = encoder.decode(codes) if encoder.names_items else encoder.decode(codes, pop.ranked)
    return [f"code {int(c):#x}" if x is None else x for c, x in zip(codes, items, strict=True)]


def ours_pem(pop: Population, eps: float, k: int, seed: int) -> Run:
    from bayesldp.heavy_hitters import PEM

    pem = PEM(eps, k, eta=4, holdout=0.0, **pem_code(pop))  # the paper's protocol, as pure-ldp's
    assert pem.n_rounds == PEM_ROUNDS - pem.encoder.names_items, pem  # 4 rounds positional
    clock = Clock()
    reports = pem.perturb(pop.items, rng=np.random.default_rng([SEED, 1, seed]))
    client = clock.lap()
    found = pem.identify(reports)
    items = named(pem.encoder, found.codes, pop)
    server = clock.lap()
    return Run(items, list(found.frequencies), client, server, clock.cpu())


def ours_sfp(pop: Population, eps: float, k: int, seed: int) -> Run:
    from bayesldp.heavy_hitters import SFP

    sfp = SFP(eps, k, max_length=pop.length, fragment_length=1, hash_bits=8,
              alphabet=pop.alphabet, m=CMS_M, k_hash=CMS_K, holdout=0.0)  # fmt: skip
    clock = Clock()
    reports = sfp.perturb(pop.items, rng=np.random.default_rng([SEED, 2, seed]))
    client = clock.lap()
    found = sfp.identify(reports)
    items = [x.decode("ascii") for x in found.items]
    server = clock.lap()
    return Run(items, list(found.frequencies), client, server, clock.cpu())


def ours_treehist(pop: Population, eps: float, seed: int) -> Run:
    from bayesldp.heavy_hitters import TreeHist

    tree = TreeHist(eps, **pem_code(pop))
    clock = Clock()
    reports = tree.perturb(pop.items, rng=np.random.default_rng([SEED, 3, seed]))
    client = clock.lap()
    found = tree.identify(reports)
    items = named(tree.encoder, found.codes, pop)
    server = clock.lap()
    return Run(items, list(found.frequencies), client, server, clock.cpu())


# ---------------------------------------------------------------------- pure-ldp
class _NumpyZerosNone:
    """numpy as pure-ldp's ``FreqOracleServer`` saw it under numpy 1: ``np.zeros(None)`` was a
    0-d array (its sketch servers pass ``d = None``); numpy 2 refuses it.  Everything else is
    numpy itself."""

    def __getattr__(self, name: str) -> Any:
        return getattr(np, name)

    @staticmethod
    def zeros(shape: Any, *args: Any, **kwargs: Any) -> np.ndarray:
        return np.zeros(() if shape is None else shape, *args, **kwargs)


def _pure_modules() -> Any:
    import_pure_ldp_oracles()  # pure-ldp's frequency_oracles/__init__ wants scikit-learn
    import pure_ldp.core._freq_oracle_server as base

    base.np = _NumpyZerosNone()  # its CMSServer does not build under numpy 2 otherwise
    import pure_ldp.heavy_hitters.apple_sfp as sfp
    import pure_ldp.heavy_hitters.prefix_extending as pem
    from pure_ldp.frequency_oracles.apple_cms import CMSClient, CMSServer

    return pem, sfp, CMSClient, CMSServer


def _seed_peer(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)  # noqa: NPY002 - pure-ldp draws from the legacy global state


def pure_runs(kind: str, pop: Population, eps: float, ks: list[int], seed: int) -> dict[int, Run]:
    """pure-ldp's PEM or SFP: one pass of privatise + aggregate, then one search per k."""
    pem, sfp, CMSClient, CMSServer = _pure_modules()
    _seed_peer(seed)
    fo_server = CMSServer(eps, CMS_K, CMS_M)
    fo_client = CMSClient(eps, fo_server.get_hash_funcs(), CMS_M)
    if kind == "PEM":
        layout = {"start_length": pop.length - PEM_ROUNDS, "max_string_length": pop.length,
                  "fragment_length": 1}  # fmt: skip
        alphabet = list(pop.alphabet) + (["*"] if pop.alphabet == LETTERS else [])
        client = pem.PEMClient(eps, **layout, alphabet=alphabet, fo_client=fo_client)
        server = pem.PEMServer(eps, **layout, alphabet=alphabet, fo_server=fo_server)
        assert server.g == PEM_ROUNDS
    else:
        layout = {"fragment_length": 1, "max_string_length": pop.length}
        client = sfp.SFPClient(eps, **layout, alphabet=set(pop.alphabet), fo_client=fo_client)
        server = sfp.SFPServer(eps, **layout, alphabet=set(pop.alphabet), fo_server=fo_server)
    privatise, aggregate = client.privatise, server.aggregate
    values = [str(x) for x in pop.items]
    clock = Clock()
    for v in values:
        aggregate(privatise(v))
    client_s = clock.lap()
    cpu_client = clock.cpu()
    n = len(values)
    runs = {}
    for k in ks:
        c0 = time.process_time()
        clock.t = time.perf_counter()
        found, counts = server.find_heavy_hitters(k=k)
        order = np.argsort(-np.asarray(counts, dtype=float), kind="stable")
        items = [str(found[i]).rstrip("*") for i in order]
        freqs = [float(counts[i]) / n for i in order]
        server_s = clock.lap()
        runs[k] = Run(items, freqs, client_s, server_s, cpu_client + time.process_time() - c0)
    return runs


# ---------------------------------------------------------------------- the grid
def warm_up_population(name: str) -> Population:
    """``WARM_N`` users holding, in turn, the 4 most frequent items of a draw of population
    ``name``: heavy enough that every method finds candidates, so the warm-up reaches the
    kernels that only run on found candidates (a plain draw of this size finds none)."""
    base = population(name, WARM_N, 0)
    items = np.resize(np.array(base.top(4), dtype=object), WARM_N)
    return _finish(name, items, base.alphabet, base.length, base.note)


def warm_up(args: argparse.Namespace) -> None:
    """One untimed run of each of ours' methods per population on ``warm_up_population``:
    numba compiles their kernels (or loads them from its cache) on the first call, a one-off
    cost that is not throughput and would otherwise land on the grid's first cells alone."""
    for name in args.populations:
        pop = warm_up_population(name)
        found = ours_sfp(pop, WARM_EPS, args.ks[0], 0).items
        assert found, f"the warm-up of SFP on {name} found nothing: it misses kernels"
        ours_pem(pop, WARM_EPS, args.ks[0], 0)
        ours_treehist(pop, WARM_EPS, 0)


def run_grid(args: argparse.Namespace) -> tuple[dict, dict[str, str]]:
    """scores[method][cell] = list (over seeds) of score dicts."""
    scores: dict[str, dict[Cell, list[dict[str, float]]]] = {}
    notes: dict[str, str] = {}
    warm_up(args)

    def add(method: str, cell: Cell, s: dict[str, float]) -> None:
        scores.setdefault(method, {}).setdefault(cell, []).append(s)

    for name in args.populations:
        for seed in range(args.first_seed, args.first_seed + args.seeds):
            pop = population(name, args.n, seed)
            notes[name] = pop.note
            notes[f"{name}:code"] = code_note(pop)
            for eps in args.eps:
                t0 = time.perf_counter()
                pure = {kind: pure_runs(kind, pop, eps, args.ks, seed) for kind in ("PEM", "SFP")}
                tree = ours_treehist(pop, eps, seed)
                for k in args.ks:
                    cell = (name, eps, k)
                    add("ours PEM", cell, ours_pem(pop, eps, k, seed).scores(pop, k))
                    add("ours SFP", cell, ours_sfp(pop, eps, k, seed).scores(pop, k))
                    add("ours TreeHist", cell, tree.scores(pop, k))
                    for kind, runs in pure.items():
                        add(f"pure-ldp {kind}", cell, runs[k].scores(pop, k))
                k0 = args.ks[0]
                recalls = ", ".join(f"{m} R@{k0} {v[(name, eps, k0)][-1]['recall']:.2f}"
                                    for m, v in scores.items())  # fmt: skip
                print(f"{name} seed {seed} eps {eps:g}: {time.perf_counter() - t0:.0f} s; "
                      f"{recalls}", file=sys.stderr, flush=True)  # fmt: skip
    return scores, notes


# ---------------------------------------------------------------------- report
def markdown(scores: dict, notes: dict[str, str], info: dict[str, str], command: str,
             args: argparse.Namespace, commit: str) -> str:  # fmt: skip
    import importlib.metadata

    cells = [(p, e, k) for p in args.populations for e in args.eps for k in args.ks]
    pem, pem_acc, pem_fast, *pem_flags = pair_table(scores, "ours PEM", "pure-ldp PEM", cells)
    sfp, sfp_acc, sfp_fast, *sfp_flags = pair_table(scores, "ours SFP", "pure-ldp SFP", cells)
    behind = "\n".join(
        f"- {kind} {what}: " + ("; ".join(cells_) or "none")
        for kind, flags in (("PEM", pem_flags), ("SFP", sfp_flags))
        for what, cells_ in zip(("behind", "metrics not judged"), flags, strict=True)
    )
    seeds = (f"seeds {args.first_seed}..{args.first_seed + args.seeds - 1}" if args.first_seed
             else f"{args.seeds} seed(s)")  # fmt: skip
    rule = verdict_rule(args.seeds)
    date = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M UTC")
    pops = "\n".join(f"- `{p}`: {notes[p]}" for p in args.populations)
    codes = "\n".join(f"- `{p}`: {notes[f'{p}:code']}" for p in args.populations)
    eps_list = ", ".join(f"{e:g}" for e in args.eps)
    k_list = ", ".join(map(str, args.ks))
    return f"""# Heavy hitters: bayesldp's PEM and SFP against pure-ldp 1.2.0's

Precision, recall, NCR (normalised cumulative rank) of the top-k and the MSE of the found items'
frequencies, and client + server users/s; n = {args.n:,} users, eps in {{{eps_list}}},
k in {{{k_list}}}, {seeds} per cell (mean ± standard deviation).
Goals: ours at least as good in every accuracy cell (precision, recall, NCR not lower,
MSE not higher; "-": nothing returned, a tie when neither returns anything), {rule}; and at
least {GOAL:g}x pure-ldp's users/s.
PEM: accuracy goal met in {pem_acc} of {len(cells)} cells, throughput in {pem_fast} of {len(cells)}.
SFP: accuracy goal met in {sfp_acc} of {len(cells)} cells, throughput in {sfp_fast} of {len(cells)}.

{behind}

- Command: `{command}`
- Date: {date}; commit {commit}
- Machine: {info["machine"]}, {info["cpu"]}, {info["cores"]} cores; load average at start
  {info["load"]}
- Python {info["python"]}, numpy {info["numpy"]}, bayesldp {info["bayesldp"]},
  pure-ldp {info["pure-ldp"]}, xxhash {importlib.metadata.version("xxhash")}

Populations (the drawn users are the truth; see the script's docstring):

{pops}

Layouts. Ours: `PEM(eps, k, eta=4)` over OLH, its code by the rule of `PEM`'s docstring: the
positional code (the item read as a base-|alphabet| number, named by decoding it, no
dictionary) where the items have one length and it takes at most 24 bits ({PEM_ROUNDS - 1}
rounds on 20 bits), else the 24-bit keyed hash ({PEM_ROUNDS} rounds; codes named by looking
them up among the population's distinct items).  Per population:

{codes}

Ours' SFP: `SFP(eps, k, max_length=L, fragment_length=1, hash_bits=8, alphabet, m={CMS_M},
k_hash={CMS_K})` (2k fragments kept per position, 20 % of the users report the word through
OLH, each user one report). pure-ldp:
`PEMClient/PEMServer` ({PEM_ROUNDS} rounds of one character, `start_length = L - {PEM_ROUNDS}`)
and `SFPClient/SFPServer` (`fragment_length=1`, top-k fragments per position, eps/2 + eps/2 per
user), both over its count-mean sketch `CMSClient/CMSServer(m={CMS_M}, k={CMS_K})`, the setting of
its own heavy-hitter experiments (its default OLH server hashes the whole domain per report).

Before the grid each of ours' methods runs once, untimed, at eps {WARM_EPS:g} on {WARM_N:,} users
holding the 4 most frequent items of each population (numba compiles its kernels on the first
call; items this heavy are found, so the kernels that only run on candidates compile too).
The machine was shared with other jobs: absolute users/s are noisy (+-30 % or more); both
packages ran on the same populations in the same process, one after the other. "ratio" is from
wall-clock time, "(CPU)" the same from process CPU time.

## PEM

{pem}

## SFP

{sfp}

## Where the time goes

Mean wall seconds, client + server, per run of n users (over eps, k and seeds; pure-ldp's client
pass, shared by its three k, counts once per k). Ours' client hashes each distinct item once
(`ItemEncoder.encode` groups equal items and hashes them in one compiled BLAKE2b pass: 2^32 items
give many more distinct ones than the word list), and SFP's writes a 1024-entry sketch row per
fragment user; ours' servers count the reports supporting each candidate in compiled passes
(PEM: n x candidates hash evaluations; SFP: one pass over the sketch rows); pure-ldp's client
randomises a 1024-entry sketch row per user in Python and its server adds it to the sketch.

{split_table(scores, args.populations)}

## bayesldp's TreeHist (no pure-ldp counterpart in this table)

`TreeHist(eps)` with its defaults (levels of 1 bit, z = 4, at most 64 survivors, 20 % final
group) and PEM's code (24 levels with the hash, 20 with zipf20's positional code); the top-k
of the survivors, largest estimate first.

{single_table(scores, "ours TreeHist", cells)}
"""


# ---------------------------------------------------------------------- main
def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="n = 5,000, zipf20, eps 4, k 10, one seed; writes nothing",
    )
    parser.add_argument(
        "--out",
        type=Path,
        default=None,
        metavar="PATH",
        help="markdown file (default benchmarks/results/heavy_hitters.md; with "
        "--quick nothing unless given)",
    )
    parser.add_argument("--n", type=int, default=100_000, help="users per population")
    parser.add_argument("--eps", type=float, nargs="+", default=[1.0, 2.0, 4.0])
    parser.add_argument("--ks", type=int, nargs="+", default=[10, 20, 50])
    parser.add_argument("--seeds", type=int, default=20, help="populations and runs per cell")
    parser.add_argument("--first-seed", type=int, default=0,
                        help="the first seed (fresh seeds check a flagged cell)")  # fmt: skip
    parser.add_argument("--populations", nargs="+", default=list(POPULATIONS),
                        choices=POPULATIONS)  # fmt: skip
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.eps, args.ks, args.seeds, args.populations = 5_000, [4.0], [10], 1, ["zipf20"]
    if args.n < 1_000:
        parser.error("--n: at least 1000 users")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    command = "python " + " ".join(
        shlex.quote(a) for a in [os.path.relpath(sys.argv[0]), *(argv or sys.argv[1:])]
    )
    check_xxhash()
    info = machine_info()
    git = ["git", "rev-parse", "--short", "HEAD"]
    head = subprocess.run(git, cwd=ROOT, text=True, capture_output=True, check=False)
    commit = head.stdout.strip() or "unknown"
    scores, notes = run_grid(args)
    text = markdown(scores, notes, info, command, args, commit)
    print(text)
    out = args.out if args.out is not None else (None if args.quick else DEFAULT_OUT)
    if out is not None:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text)
        print(f"wrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
