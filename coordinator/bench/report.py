"""The bench's outputs: a text/markdown table of every scenario and target, and a PNG chart."""

from __future__ import annotations

from typing import Any

from coordinator.bench.env import storage_label


def _cell(x: Any) -> str:
    if x is None:
        return "-"
    if isinstance(x, float):
        return f"{x:.2f}" if x < 1000 else f"{x:.0f}"
    return str(x)


def markdown(report: dict[str, Any]) -> str:
    o, m = report["options"], report["machine"]
    lines = [
        f"Run of {report['started']} ({report['seconds']} s): {o['database']} + {storage_label(o['storage'])} storage, "
        f"{o['duration']:g} s per scenario, service workers {report.get('service_workers', 1)}; "
        f"{m.get('cpus')} CPUs ({m.get('cpu', '?')}), "
        f"{m.get('memory_gib', '?')} GiB, Python {m.get('python')}.",
        "",
        "| scenario | system | commits/s (ops/s) | p50 ms | p95 ms | p99 ms | conflicts | retries | failures |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in report["results"]:
        lines.append(f"| {r['scenario']} | {r['system']} | {_cell(r['per_second'])} | {_cell(r['p50_ms'])} | "
                     f"{_cell(r['p95_ms'])} | {_cell(r['p99_ms'])} | {r['conflicts']} | {r['retries']} | "
                     f"{r['failures']} |")
    if any(r["scenario"].startswith("8.") for r in report["results"]):
        from coordinator.bench.catalogs import NOTE

        lines += ["", NOTE]
    lines += fairness_lines(report["results"])
    lines += ["", "Work per ratified commit (owner scenarios, from the service's /metrics counters):", "",
              "| scenario | storage requests | of which put_if_absent | DB statements | explicit DB transactions | "
              "DB round trips | refusals |",
              "|---|---:|---:|---:|---:|---:|---:|"]
    for r in report["results"]:
        w = r.get("work")
        if w:
            lines.append(f"| {r['scenario']} | {w.get('storage_requests')} | {w.get('storage_put_if_absent', 0)} | "
                         f"{w.get('db_statements')} | {w.get('db_transactions')} | {w.get('db_round_trips')} | "
                         f"{w.get('refusals_per_commit')} |")
    cpu_rows = [r for r in report["results"] if (r.get("cpu") or {}).get("service_cpu_ms_per_commit") is not None]
    if cpu_rows:
        lines += ["", "CPU (owner scenarios, process CPU time around the load; scenario 3 includes its getCommits "
                      "readers). The load generator is this bench process:", "",
                  "| scenario | service settings | service CPU ms / commit | service cores | load generator cores | "
                  "load generator cores per 1,000 req/s |",
                  "|---|---|---:|---:|---:|---:|"]
        for r in cpu_rows:
            c = r["cpu"]
            lines.append(f"| {r['scenario']} | {r.get('settings', '-')} | {_cell(c['service_cpu_ms_per_commit'])} | "
                         f"{_cell(c['service_cores'])} | {_cell(c['load_generator_cores'])} | "
                         f"{_cell(c['load_generator_cores_per_1k_rps'])} |")
    g = report["growth"]
    if g:
        lines += ["", f"Growth (scenario 6): {g['tables_added']} tables and {g['rows_added']} commit rows added in "
                      f"{g['seconds']} s; the database then held {g['tables_total']} tables and "
                      f"{g['commit_rows_total']} commit rows."]
    lines += ["", "| target | measured | rule | met |", "|---|---:|---|---|"]
    for t in report["targets"]:
        lines.append(f"| {t['target']} | {_cell(t['measured'])} | {t['rule']} | {'met' if t['met'] else 'NOT met'} |")
    lines += _open_ratios(report)
    if report.get("compaction"):
        from coordinator.bench.compaction import markdown_lines

        lines += markdown_lines(report["compaction"])
    c = report["consistency"]
    lines += ["", f"Consistency: {c['tables']} tables checked, latestTableVersion equal to the acknowledged "
                  f"commits on every one: {'yes' if not c['violations'] else 'NO: ' + '; '.join(c['violations'])}."]
    return "\n".join(lines) + "\n"


def _open_ratios(report: dict[str, Any]) -> list[str]:
    """Scenario 7 side by side: open time at version N over version 10, per reader, without and with checkpoints."""
    ratios, n = report.get("openRatios") or {}, report["options"].get("open_versions")
    if not ratios:
        return []
    lines = ["", f"Scenario 7, open time at version {n} over version 10 (p50s):", "",
             "| reader | no checkpoints | checkpoints |", "|---|---:|---:|"]
    for reader, r in ratios.items():
        lines.append(f"| {reader} | {_cell(r.get('no checkpoints'))} | {_cell(r.get('checkpoints'))} |")
    return lines


def fairness_lines(results: list[dict[str, Any]]) -> list[str]:
    """Scenario 2 (writers racing on one table): latency and each writer's share of the commits."""
    rows = [r for r in results if r.get("fairness") and r["system"] == "owner" and r["scenario"].startswith("2.")]
    if not rows:
        return []
    out = ["", "Racing writers, one table (a fair share is 1/writers; Jain's index is 1 when all got the same):", "",
           "| writers | commits/s | p50 ms | p99 ms | smallest share | largest share | fair share | Jain |",
           "|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        f = r["fairness"]
        out.append(f"| {f['writers']} | {_cell(r['per_second'])} | {_cell(r['p50_ms'])} | {_cell(r['p99_ms'])} | "
                   f"{_share(f['min_share'])} | {_share(f['max_share'])} | {_share(1 / f['writers'])} | "
                   f"{_cell(f['jain'])} |")
    return out


def _share(x: float | None) -> str:
    return "-" if x is None else f"{x:.3f}"


def text(report: dict[str, Any]) -> str:
    out = ["", "service CPU per ratified commit:"]
    for r in report["results"]:
        c = r.get("cpu") or {}
        if c.get("service_cpu_ms_per_commit") is not None:
            out.append(f"  {r['scenario']} [{r.get('settings', '-')}]: {c['service_cpu_ms_per_commit']:.2f} ms "
                       f"(load generator {c['load_generator_cores_per_1k_rps']} cores per 1,000 req/s)")
    out += ["", "targets:"]
    for t in report["targets"]:
        out.append(f"  {'MET    ' if t['met'] else 'NOT MET'}  {t['target']}: {_cell(t['measured'])} ({t['rule']})")
    return "\n".join(out)


def chart(report: dict[str, Any], path: str) -> None:
    """Latency percentiles (log scale) and throughput per scenario, owner beside floor and delta-rs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in report["results"] if r["p50_ms"] is not None]
    labels = [f"{r['scenario']} [{r['system']}]" for r in rows]
    colors = {"owner": "tab:blue", "floor": "tab:gray", "delta-rs": "tab:orange", "duckdb": "tab:green"}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(15, 0.42 * len(rows) + 2), sharey=True)
    y = range(len(rows))
    for key, marker in (("p50_ms", "o"), ("p95_ms", "s"), ("p99_ms", "^")):
        ax1.scatter([r[key] for r in rows], list(y), marker=marker, label=key.replace("_ms", ""),
                    c=[colors.get(r["system"], "k") for r in rows], alpha=0.8)
    ax1.set_xscale("log")
    ax1.set_xlabel("latency, ms (log): o p50, s p95, ^ p99")
    ax1.set_yticks(list(y))
    ax1.set_yticklabels(labels, fontsize=8)
    ax1.invert_yaxis()
    ax1.grid(True, axis="x", which="both", alpha=0.3)
    ax2.barh(list(y), [r["per_second"] for r in rows], color=[colors.get(r["system"], "k") for r in rows])
    ax2.set_xlabel("operations per second")
    ax2.grid(True, axis="x", alpha=0.3)
    o = report["options"]
    fig.suptitle(f"commit-owner bench: {o['database']} + {storage_label(o['storage'])}, {o['duration']:g} s per scenario "
                 f"({report['started']})")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
