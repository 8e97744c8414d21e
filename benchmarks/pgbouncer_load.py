"""The annotators' loop through PgBouncer in transaction mode against the direct connection, in
one run: ``annotator_load.py``'s load (8 annotators, the vote with next, gunicorn with 4
workers) once per leg, each on a fresh project of its own, legs one after another on the same
PostgreSQL. Prints each leg's figures, then votes/s of each against ``direct``'s.

Legs (``--legs``, in the order given):

- ``direct``: DATABASE_URL as given, the hot path's statements prepared with SQL ``PREPARE``
  (``ARBITER_STATEMENT_PLANS=prepare``, the default without a pooler);
- ``pgbouncer``: through Debian's PgBouncer in transaction mode with ``--pool-size`` server
  connections (fewer than the workers), ``ARBITER_DB_POOLER=transaction``: the statements
  kept as PL/pgSQL functions (``ARBITER_STATEMENT_PLANS=functions``, its default there);
- ``pgbouncer-unprepared``: the same pooler, ``ARBITER_STATEMENT_PLANS=none``: every statement
  planned on every call (the pooler's path before the functions);
- ``direct-functions``: direct, ``ARBITER_STATEMENT_PLANS=functions``: the functions against
  ``PREPARE`` without the pooler's hop;
- ``direct-unprepared``: direct, ``ARBITER_STATEMENT_PLANS=none``: what planning on every
  call costs, without the pooler's hop;
- ``direct-protocol``: direct, unprepared by SQL but prepared at the protocol level by psycopg
  (``ARBITER_DB_PREPARE_THRESHOLD``, server-side binding): what PgBouncer 1.21+ with
  ``max_prepared_statements`` could give back; 1.18 (Debian's here) forwards no prepared
  statement, so it is measured direct.

    DATABASE_URL=postgres://postgres@127.0.0.1:5432/arbiter_bench \\
        .venv/bin/python benchmarks/pgbouncer_load.py
    ... --legs direct,pgbouncer,direct-functions,pgbouncer-unprepared --duration 30

PgBouncer is started by the script (tests/pgbouncer.py: a free loopback port, an ini in a
temporary folder), its CPU counted beside gunicorn's and PostgreSQL's. Run it alone on the
machine: the legs share the CPUs with nothing else.
"""

from __future__ import annotations

import annotator_load as load
from loop_report import print_measured

LEGS: dict[str, dict[str, str]] = {
    "direct": {},
    "pgbouncer": {"ARBITER_DB_POOLER": "transaction"},
    "pgbouncer-unprepared": {"ARBITER_DB_POOLER": "transaction", "ARBITER_STATEMENT_PLANS": "none"},
    "direct-functions": {"ARBITER_STATEMENT_PLANS": "functions"},
    "direct-unprepared": {"ARBITER_STATEMENT_PLANS": "none"},
    "direct-protocol": {
        "ARBITER_STATEMENT_PLANS": "none",
        "ARBITER_DB_PREPARE_THRESHOLD": "5",
    },
}


def run_leg(args, leg: str) -> dict:
    """One leg: its own project, its server, its figures printed; returns the summary."""
    from django.db import connections

    from tests.pgbouncer import PgBouncer

    print(f"=== {leg}")
    slug, tokens = load.prepare_fixture(args)
    env = dict(LEGS[leg])
    bouncer = None
    others = {}
    if env.get("ARBITER_DB_POOLER") == "transaction":
        bouncer = PgBouncer.for_database(
            connections["default"].settings_dict, pool_size=args.pool_size
        ).start()
        env["DATABASE_URL"] = bouncer.url
        assert bouncer.process is not None  # started
        others["PgBouncer"] = bouncer.process.pid
        print(f"PgBouncer: transaction mode, {args.pool_size} server connections")
    try:
        measured = load.measure(args, slug=slug, tokens=tokens, extra_env=env, others=others)
    finally:
        if bouncer is not None:
            bouncer.stop()
    found = print_measured(args, slug, measured)
    if not args.keep:
        load.delete_project(slug)
    broken = found["pairs_over_target"] + found["duplicate_votes"] + found["counter_mismatches"]
    return {
        "votes_per_s": measured.votes_per_s,
        "p95": load.percentile(measured.votes, 0.95),
        "errors": len(measured.errors),
        "broken": broken,
    }


def main() -> None:
    parser = load.arguments(__doc__.split("\n\n")[0])
    parser.add_argument(
        "--legs",
        default="direct,pgbouncer",
        help=f"comma-separated, in this order, of: {', '.join(LEGS)}",
    )
    parser.add_argument("--pool-size", type=int, default=2, help="PgBouncer's server connections")
    args = parser.parse_args()
    legs = [leg.strip() for leg in args.legs.split(",") if leg.strip()]
    unknown = [leg for leg in legs if leg not in LEGS]
    if unknown:
        raise SystemExit(f"--legs: unknown {', '.join(unknown)}; use {', '.join(LEGS)}")
    if args.url:
        raise SystemExit("--url: each leg starts its own server")
    load.setup_django()
    results = {leg: run_leg(args, leg) for leg in legs}
    print("=== summary")
    direct = results.get("direct", {}).get("votes_per_s")
    for leg, figures in results.items():
        ratio = f", {figures['votes_per_s'] / direct:.2f}x direct" if direct else ""
        print(
            f"{leg:18s} {figures['votes_per_s']:7.1f} votes/s{ratio}, vote+next p95 "
            f"{figures['p95']:.1f} ms, {figures['errors']} errors, "
            f"{figures['broken']} broken invariants"
        )
    if direct and "pgbouncer" in results:
        share = results["pgbouncer"]["votes_per_s"] / direct
        print(f"pgbouncer / direct: {share:.2f}   (target >= 0.8, with no errors)")


if __name__ == "__main__":
    main()
