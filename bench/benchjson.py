"""Used by tables.py: gathers a Google Benchmark JSON's rows into a table of cells per
implementation, using the median aggregate where --benchmark_repetitions
made one, else the median of the runs; a failed or unverified row becomes its reason (str)."""
import statistics


def collect(benchmarks, row_key, cell_of, median_of):
    """row_key(bench) -> key tuple whose last item is the implementation, or None to skip;
    cell_of(bench) -> the row's cell, or None when the row has none; median_of(cells) -> cell.
    Returns ({key[:-1]: {impl: cell}} in file order, {key: label})."""
    runs, medians, errors, labels, order = {}, {}, {}, {}, {}
    for b in benchmarks:
        key = row_key(b)
        if key is None:
            continue
        order.setdefault(key[:-1], len(order))
        if b.get("error_occurred"):
            errors[key] = b.get("error_message", "error")
            continue
        if b.get("run_type") == "aggregate":
            if b.get("aggregate_name") == "median" and cell_of(b) is not None:
                medians[key] = cell_of(b)
            continue
        if b.get("verified") != 1:
            errors[key] = "not verified"
            continue
        if cell_of(b) is not None:
            runs.setdefault(key, []).append(cell_of(b))
        if b.get("label"):
            labels[key] = b["label"]
    table = {}
    for key in set(runs) | set(medians) | set(errors):
        cell = errors.get(key)
        if cell is None:
            cell = medians[key] if key in medians else median_of(runs[key])
        table.setdefault(key[:-1], {})[key[-1]] = cell
    return dict(sorted(table.items(), key=lambda item: order[item[0]])), labels
