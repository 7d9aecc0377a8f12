"""``bayesldp estimate --mechanism PEM`` (or TreeHist, SFP) on a file of heavy-hitter reports.

A report file of :class:`~bayesldp.heavy_hitters.PEM` or
:class:`~bayesldp.heavy_hitters.TreeHist` has one row per user: ``group`` (the user's round,
``0..G-1``, or ``G`` for the estimation group of ``--holdout`` / TreeHist's final group) and
``a``, ``b``, ``y`` (the OLH report of the user's prefix); ``PEMReports.to_file(path)`` writes
one.  The protocol's public parameters come from the command line (``--epsilon``, ``--k``,
``--bits``, ``--eta``, ``--key``, ``--max-length``, ``--holdout``, ``--g``; TreeHist: ``--z``,
``--max-survivors``, ``--final-share``; for a positional code, ``--alphabet`` and ``--length`` in
place of ``--bits``, ``--key``, ``--max-length``) and must be those the reports were made with.
A file that ``to_file`` wrote says which they were: its stamp (a CSV file's first line
``# bayesldp PEMReports {json}``, a Parquet file's metadata; :mod:`bayesldp._report_stamp`)
holds the code's fingerprint (hash key and width, or positional alphabet and length), the
rounds' prefix lengths, epsilon, ``g`` and the holdout share, and a command line that differs
is refused in one line naming the difference (another code, layout, budget or holdout), as is
the stamp of an SFP file.  A file without a stamp (pandas' own ``to_frame().to_csv``) is read on
trust: only its groups can disagree with the round layout the options imply (a group outside
it, or an empty one, is refused in one line); a wrong ``--key`` goes unnoticed and finds codes
that ``--candidates`` does not name.

The table: one row per found item, largest estimate first, with its code (hex), the item when
``--candidates`` names it (the code is a keyed hash: only a list of candidate items recovers
it; a positional code names its item itself), and the unbiased OLH estimate of its share
(``--method oracle``, the default) or its posterior mean, 90% credible interval and
``Pr(share > --threshold)`` (``--method posterior``, :meth:`PEM.posterior`, with an "other" row
for everything else).

An :class:`~bayesldp.heavy_hitters.SFP` file carries its users' two kinds of report, one row per
user (``SFPReports.to_file(path)`` writes one, stamped as above with the code's fingerprint,
SFP's layout, epsilon and ``g``): ``kind`` (``fragment``, ``word`` or ``holdout``),
``position``, ``row`` and ``bits`` (a fragment user's position, count-mean-sketch hash row and
``m`` entries as a string of ``0``/``1``, ``1`` for +1) and ``a``, ``b``, ``y`` (a word or
holdout user's OLH report of its code); the cells a row's kind does not use hold ``0``
(``bits``: ``-``), and a row whose unused cells hold a report is refused as of the wrong kind.
Its options: ``--k``, ``--max-length`` (default 10), ``--fragment-length``, ``--hash-bits``,
``--alphabet``, ``--fragments``, ``--word-share``, ``--holdout``, ``--bits``, ``--key``,
``--m``, ``--k-hash``, ``--hash-seed``, ``--g``.  SFP recovers the items themselves: no
``--candidates`` is needed.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import numpy as np

from bayesldp._report_stamp import STAMP_KEY
from bayesldp.errors import InvalidInputError

#: the heavy-hitter protocols ``estimate`` reads (lower case -> class name)
HEAVY_HITTERS = {"pem": "PEM", "treehist": "TreeHist", "sfp": "SFP"}
#: the kinds of row of an SFP report file
SFP_KINDS = ("fragment", "word", "holdout")
#: what ``--method`` may be for them
METHODS = ("oracle", "posterior")


def is_heavy_hitter(name: str | None) -> bool:
    """Whether ``--mechanism`` names a heavy-hitter protocol."""
    return name is not None and name.lower() in HEAVY_HITTERS


def add_heavy_hitter_options(parser: argparse.ArgumentParser) -> None:
    """``estimate``'s options of PEM, TreeHist and SFP (defaults: the classes')."""
    group = parser.add_argument_group("heavy hitters (--mechanism PEM, TreeHist or SFP)")
    group.add_argument("--bits", type=int, help="hash code width (default 24)")
    group.add_argument("--eta", type=int, help="bits per round (default: PEM 4, TreeHist 1)")
    group.add_argument("--key", help="the survey's public hash key (default the package's)")
    group.add_argument("--max-length", type=int,
                       help="longest item in bytes (default PEM, TreeHist 64; SFP 10)")  # fmt: skip
    group.add_argument("--holdout", type=float, default=None,
                       help="PEM, SFP: share of users in the estimation group (default the "
                       "classes', 0.2; 0: the papers' protocol)")  # fmt: skip
    group.add_argument("--z", type=float, default=4.0,
                       help="TreeHist: threshold in standard errors (default 4)")  # fmt: skip
    group.add_argument("--max-survivors", type=int, default=64,
                       help="TreeHist: prefixes kept per level (default 64)")  # fmt: skip
    group.add_argument("--final-share", type=float, default=0.2,
                       help="TreeHist: share of users in the last group (default 0.2)")  # fmt: skip
    group.add_argument("--fragment-length", type=int, default=1,
                       help="SFP: bytes per fragment (default 1)")  # fmt: skip
    group.add_argument("--hash-bits", type=int, default=8,
                       help="SFP: bits of the tag joined to each fragment (default 8)")  # fmt: skip
    group.add_argument("--alphabet", help="SFP: the characters items are made of (default: all "
                       "256 bytes); PEM, TreeHist: with --length, the positional code's "
                       "symbols, in order")  # fmt: skip
    group.add_argument("--length", type=int,
                       help="PEM, TreeHist: every item's number of characters; with --alphabet, "
                       "the positional code (the item read as a base-|alphabet| number) in "
                       "place of the keyed hash")  # fmt: skip
    group.add_argument("--fragments", type=int,
                       help="SFP: values kept per position (default 2 k)")  # fmt: skip
    group.add_argument("--word-share", type=float, default=0.2,
                       help="SFP: share of users reporting the whole word "
                       "(default 0.2)")  # fmt: skip


def protocol(args: argparse.Namespace) -> Any:
    """The PEM, TreeHist or SFP of the command line."""
    from bayesldp.heavy_hitters import PEM, SFP, TreeHist
    from bayesldp.heavy_hitters.encoding import DEFAULT_BITS, DEFAULT_KEY

    name = HEAVY_HITTERS[args.mechanism.lower()]
    if args.epsilon is None:
        raise InvalidInputError(f"--epsilon: required with --mechanism {name}")
    if isinstance(args.k, tuple):
        raise InvalidInputError(f"--k: one number with --mechanism {name}, got {args.k}")
    key = DEFAULT_KEY if args.key is None else args.key
    if args.k is None and name != "TreeHist":
        raise InvalidInputError(f"--k: required with --mechanism {name} (heavy hitters to find)")
    holdout = {} if args.holdout is None else {"holdout": args.holdout}
    if name == "SFP":
        sketch = {"m": args.m, "k_hash": args.k_hash, "hash_seed": args.hash_seed}
        return SFP(args.epsilon, args.k, max_length=10 if args.max_length is None
                   else args.max_length, fragment_length=args.fragment_length,
                   hash_bits=args.hash_bits, alphabet=args.alphabet, fragments=args.fragments,
                   word_share=args.word_share, **holdout,
                   bits=DEFAULT_BITS if args.bits is None else args.bits, key=key,
                   g=args.g, **{k: v for k, v in sketch.items() if v is not None})  # fmt: skip
    common = {"encoder": positional_encoder(args), "g": args.g}
    if common["encoder"] is None:
        common.update(bits=args.bits, key=args.key, max_length=args.max_length)
    if name == "PEM":
        eta = 4 if args.eta is None else args.eta
        return PEM(args.epsilon, args.k, eta=eta, **holdout, **common)
    eta = 1 if args.eta is None else args.eta
    return TreeHist(args.epsilon, eta=eta, z=args.z, max_survivors=args.max_survivors,
                    final_share=args.final_share, **common)  # fmt: skip


def positional_encoder(args: argparse.Namespace) -> Any:
    """PEM's or TreeHist's :class:`~bayesldp.heavy_hitters.PositionalEncoder` of ``--alphabet``
    and ``--length``, or None (the keyed hash of ``--bits``, ``--key``, ``--max-length``)."""
    from bayesldp.heavy_hitters import PositionalEncoder

    if args.alphabet is None and args.length is None:
        return None
    if args.alphabet is None or args.length is None:
        missing = "--length" if args.length is None else "--alphabet"
        raise InvalidInputError(
            f"{missing}: needed with {'--alphabet' if args.length is None else '--length'} for "
            f"--mechanism {args.mechanism} (the positional code takes both)"
        )
    hashed = [o for o, v in (("--bits", args.bits), ("--key", args.key),
                             ("--max-length", args.max_length)) if v is not None]  # fmt: skip
    if hashed:
        raise InvalidInputError(
            f"{', '.join(hashed)}: the keyed hash's; --alphabet and --length give the positional "
            "code instead: give one or the other"
        )
    return PositionalEncoder(args.alphabet, args.length)


def _parameters(frame: Any, path: str | Path, protocol: Any, mine: dict[str, Any]) -> dict:
    """The public parameters of the reports in ``frame``: its file's stamp if it has one,
    checked against ``protocol``'s at once (a mismatch is named before any row is read), else
    ``mine``, ``protocol``'s own (a file without a stamp: the command line's, on trust)."""
    stamp = frame.attrs.get(STAMP_KEY)
    if stamp is None:
        return mine
    theirs = {name: stamp[name] for name in mine}
    try:
        protocol.check_parameters(**theirs)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{path}: {exc}") from None
    return theirs


def read_reports(path: str | Path, pem: Any) -> Any:
    """The :class:`~bayesldp.heavy_hitters.PEMReports` (or, for an SFP, the
    :class:`~bayesldp.heavy_hitters.SFPReports`) of a report file, with the public parameters
    of its stamp (``PEMReports.to_file``; a file without one: ``pem``'s), checked by ``pem``
    (errors name the file)."""
    from bayesldp.heavy_hitters import SFP, PEMReports
    from bayesldp.mechanisms.base import int_columns
    from bayesldp.workflows.report_files import read_table

    if isinstance(pem, SFP):
        return read_sfp_reports(path, pem)
    frame = read_table(path, stamp="PEMReports")
    mine = {"fingerprint": pem.encoder.fingerprint, "prefix_lengths": pem.prefix_lengths,
            "epsilon": pem.epsilon, "g": pem.g, "holdout": pem.holdout}  # fmt: skip
    params = _parameters(frame, path, pem, mine)
    group, a, b, y = int_columns(frame, ["group", "a", "b", "y"], path)
    reports = PEMReports(group, a, b, y, params["fingerprint"], tuple(params["prefix_lengths"]),
                         params["epsilon"], params["g"], params["holdout"])  # fmt: skip
    try:
        return pem.check_reports(reports)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{path}: {exc}") from None


def read_sfp_reports(path: str | Path, sfp: Any) -> Any:
    """The :class:`~bayesldp.heavy_hitters.SFPReports` of a report file (module docstring's
    layout), stamped with ``sfp``'s public parameters and checked by it; a row of an unknown
    kind, or whose unused cells hold a report (the wrong kind), is refused naming its line."""
    from bayesldp.heavy_hitters import SFPReports
    from bayesldp.mechanisms.base import int_columns
    from bayesldp.mechanisms.hashing import HashReports
    from bayesldp.mechanisms.sketch import CMSReports
    from bayesldp.workflows.report_files import LINES_BEFORE_HEADER, read_table

    frame = read_table(path, text=("kind", "bits"), stamp="SFPReports")
    mine = {"fingerprint": sfp.encoder.fingerprint, "layout": sfp.layout, "epsilon": sfp.epsilon,
            "g": sfp.g}  # fmt: skip
    params = _parameters(frame, path, sfp, mine)
    header = 1 + frame.attrs.get(LINES_BEFORE_HEADER, 0)  # 2 after a stamp line

    def line(rows: np.ndarray) -> str:
        """The first of ``rows`` (0-based data rows) as a CSV line number."""
        return f"line {int(rows[0]) + 1 + header}"

    absent = [c for c in ("kind", "bits") if c not in frame.columns]
    if absent:
        raise InvalidInputError(
            f"reports: {path} lacks column(s) {', '.join(absent)} of an SFP file (kind, position, "
            f"row, bits, a, b, y); it has {', '.join(map(str, frame.columns))}"
        )
    position, row, a, b, y = int_columns(frame, ["position", "row", "a", "b", "y"], path)
    kind = frame["kind"].astype(str).str.strip().to_numpy()
    bits = frame["bits"].astype(str).str.strip()
    unknown = ~np.isin(kind, SFP_KINDS)
    if unknown.any():
        raise InvalidInputError(
            f"{path}: {line(np.flatnonzero(unknown))} has kind {kind[unknown][0]!r}; expected "
            "fragment, word or holdout"
        )
    frag = kind == "fragment"
    wrong = frag & ((a != 0) | (b != 0) | (y != 0))
    wrong |= ~frag & ((position != 0) | (row != 0) | (bits != "-").to_numpy())
    if wrong.any():
        i = np.flatnonzero(wrong)
        what = ("an OLH report (a, b, y not 0)" if frag[i[0]]
                else "a sketch report (position, row not 0 or bits not '-')")  # fmt: skip
        raise InvalidInputError(
            f"{path}: {line(i)} is of kind {kind[i[0]]} but holds {what}: the wrong kind?"
        )
    if sfp.holdout == 0 and np.any(kind == "holdout"):
        raise InvalidInputError(
            f"{path}: holds holdout rows ({line(np.flatnonzero(kind == 'holdout'))}), but "
            "--holdout is 0; give the share the reports were made with"
        )
    m = sfp.sketch_params["m"]
    text = bits[frag]
    short = (text.str.len() != m).to_numpy()
    if short.any():
        i = np.flatnonzero(frag)[short]
        raise InvalidInputError(
            f"{path}: {line(i)} has bits of {len(text.iloc[int(np.flatnonzero(short)[0])])} "
            f"character(s); a fragment row holds m = {m} (0 or 1 each)"
        )
    raw = np.frombuffer("".join(text).encode("ascii", "replace"), dtype=np.uint8)
    raw = raw.reshape(-1, m)
    bad = ~np.isin(raw, (48, 49)).all(axis=1)
    if bad.any():
        raise InvalidInputError(
            f"{path}: {line(np.flatnonzero(frag)[bad])} has bits other than 0 and 1"
        )
    packed = np.packbits(raw == 49, axis=1, bitorder="little")  # '1' -> +1, 1 bit an entry

    def olh(name: str) -> HashReports:
        mask = kind == name
        return HashReports(a[mask], b[mask], y[mask])

    reports = SFPReports(position[frag], CMSReports(row[frag], packed=packed, m=m), olh("word"),
                         olh("holdout") if sfp.holdout else None, params["fingerprint"],
                         tuple(dict(params["layout"]).items()), params["epsilon"],
                         params["g"])  # fmt: skip
    try:
        return sfp.check_reports(reports)
    except InvalidInputError as exc:
        raise InvalidInputError(f"{path}: {exc}") from None


def _posterior(args: argparse.Namespace, pem: Any, reports: Any, found: Any, labels: list[str]):
    from bayesldp.bayes import save_fit
    from bayesldp.workflows.estimate_tables import posterior_options

    threshold = 0.01 if args.threshold is None else args.threshold
    post = pem.posterior(reports, found, threshold, labels=labels, prior=args.prior,
                         method=args.fit_method, random_seed=args.seed,
                         progressbar=None if not args.quiet else False,
                         **posterior_options(args))  # fmt: skip
    if args.save_posterior:
        save_fit(post.idata, args.save_posterior)
    draws = post.idata.posterior["theta"].values.reshape(-1, len(labels) + 1)
    low, high = np.quantile(draws, [0.05, 0.95], axis=0)
    prob = [*map(float, post.prob_above.values), ""]
    return draws.mean(axis=0), low, high, prob, threshold


def estimate_heavy_hitters(args: argparse.Namespace) -> int:
    """``bayesldp estimate REPORTS --mechanism PEM|TreeHist|SFP``: the found items' table."""
    from bayesldp.workflows.tables import Table, print_table

    method = "oracle" if args.method is None else args.method
    if method not in METHODS:
        raise InvalidInputError(
            f"--method: {args.mechanism} gives 'oracle' (the found items' unbiased estimates) "
            f"or 'posterior', got {method!r}"
        )
    if args.save_posterior and method != "posterior":
        raise InvalidInputError("--save-posterior: only with --method posterior")
    pem = protocol(args)
    if Path(args.reports).is_dir() or any(ch in str(args.reports) for ch in "*?["):
        raise InvalidInputError(f"reports: {type(pem).__name__} reads one file, got {args.reports}")
    reports = read_reports(args.reports, pem)
    found = pem.identify(reports)
    codes = [int(c) for c in found.codes]
    width = (pem.encoder.bits + 3) // 4
    hexes = [f"0x{c:0{width}x}" for c in codes]
    sfp = hasattr(found, "items")  # SFP recovers the items themselves
    if sfp:
        items = [x.decode("utf-8", "backslashreplace") for x in found.items]
    elif args.candidates:
        items = pem.encoder.decode(codes, args.candidates)
    elif pem.encoder.names_items:  # a positional code: the item itself
        items = pem.encoder.decode(codes)
    else:
        items = [None] * len(codes)
    named = [hx if item is None else str(item) for hx, item in zip(hexes, items, strict=True)]
    n, name = len(reports), type(pem).__name__
    title = [f"{pem!r}: {n:,} reports; {len(codes)} item(s) found"]
    notes = []
    if not args.candidates and not sfp and not pem.encoder.names_items:
        notes.append("note: --candidates a b c names the codes (a keyed hash of each item)")
    columns = ["rank", "code", "item", "estimate"]
    found_rows = zip(hexes, items, found.frequencies, strict=True)
    rows = [[i + 1, hx, "" if item is None else str(item), float(f)]
            for i, (hx, item, f) in enumerate(found_rows)]  # fmt: skip
    kind = f"{name} unbiased OLH estimate of each found item's share"
    if method == "posterior" and codes:
        mean, low, high, prob, threshold = _posterior(args, pem, reports, found, named)
        columns = [*columns, "lower_5", "upper_95", f"prob_above_{threshold:g}"]
        rows = [[*row[:3], float(mean[j]), float(low[j]), float(high[j]), prob[j]]
                for j, row in enumerate([*rows, ["", "", "other", 0.0]])]  # fmt: skip
        kind = (f"posterior mean ({args.fit_method}), 90% credible interval, "
                f"Pr(share > {threshold:g})")  # fmt: skip
    elif method == "posterior":
        notes.append("note: nothing was found, so there is no posterior")
    title[0] += f"; {kind}"
    meta = {"mechanism": name, "parameters": repr(pem), "reports": n, "method": method,
            "estimate": kind}  # fmt: skip
    formats = dict.fromkeys(columns[3:], ".4f")
    print_table(Table(columns, rows, title, notes, meta, None, formats), args.output)
    return 0
