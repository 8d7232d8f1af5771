"""report.html: one self-contained page (inline CSS, plots as base64 PNG, no script, no network)."""
import base64
import html
import io

CSS = """
body { font: 15px/1.45 system-ui, sans-serif; margin: 2em auto; max-width: 1150px; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; margin-top: 2em; }
table { border-collapse: collapse; margin: .6em 0; } td, th { border: 1px solid #ccc; padding: .25em .6em;
  text-align: left; vertical-align: top; } th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.note { color: #555; } .warn { background: #fff6e0; border-left: 4px solid #e0a000; padding: .4em .8em; }
figure { margin: .6em 0; display: inline-block; } img { max-width: 100%; }
.side { display: grid; grid-template-columns: minmax(0, 1fr) minmax(0, 1fr); gap: .8em; }
pre { background: #f8f8f8; padding: .6em; overflow-x: auto; font-size: 12px; }
mark { background: #ffd36b; } nav a { margin-right: 1em; }
"""


def esc(text) -> str:
    return html.escape(str(text))


def figure(fig, alt: str) -> str:
    """A matplotlib figure as an inline PNG (closed afterwards)."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=90, bbox_inches="tight")
    plt.close(fig)
    data = base64.b64encode(buffer.getvalue()).decode()
    return f'<figure><img class="plot" alt="{esc(alt)}" src="data:image/png;base64,{data}"></figure>'


def histogram(values, title: str, xlabel: str, lines=(), span=None):
    """`span`: the x range (0 to the maximum points), so that classes and parts compare at a glance."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(4.2, 2.6))
    ax.hist(values, bins=20 if span else min(20, max(5, len(set(values)))), range=span, color="#4a78b0",
            edgecolor="white")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    for x, label in lines:
        ax.axvline(x, color="#c03030", linestyle="--", label=label)
    if lines:
        ax.legend(fontsize=8)
    ax.set_title(title, fontsize=10)
    ax.set_xlabel(xlabel, fontsize=9)
    ax.set_ylabel("students", fontsize=9)
    return fig


def table(t, shaded: bool = False) -> str:
    """A tables.Table as HTML; cells are the CSV's strings, names behind <details> where the table has them.
    `shaded`: a heatmap, each percentage cell coloured from red (0%) to white (100%)."""
    head = "".join(f"<th>{esc(c)}</th>" for c in t.columns)
    body = []
    for i, row in enumerate(t.rows):
        cells = []
        for column, cell in zip(t.columns, row):
            css = ' class="num"' if _numeric(cell) else ""
            if shaded and cell.endswith("%") and _numeric(cell):
                css += f' style="background: {_shade(float(cell[:-1]) / 100)}"'
            names = t.details.get(column)
            extra = (f"<details><summary>who</summary>{esc(', '.join(names[i]))}</details>" if names else "")
            cells.append(f"<td{css}>{esc(cell)}{extra}</td>")
        body.append(f"<tr>{''.join(cells)}</tr>")
    note = f'<p class="note">{esc(t.note)}</p>' if t.note else ""
    if not t.rows:
        return note + '<p class="note">Nothing to show.</p>'
    return (f'{note}<table id="{esc(t.id)}" data-csv="report-{esc(t.id)}.csv"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(body)}</tbody></table>')


def _shade(share: float) -> str:
    """Red for none of the points, white for all of them: what needs help is what stands out."""
    lightness = 55 + 45 * min(max(share, 0.0), 1.0)
    return f"hsl(4, 75%, {lightness:.0f}%)"


def _numeric(cell: str) -> bool:
    try:
        float(cell.rstrip("%").split("/")[0])
        return True
    except ValueError:
        return False


def page(title: str, sections: list, warnings: list) -> str:
    """sections: (id, heading, HTML)."""
    nav = "".join(f'<a href="#{esc(i)}">{esc(h)}</a>' for i, h, _ in sections)
    warn = ("<div class=\"warn\" id=\"warnings\"><strong>Warnings</strong><ul>"
            + "".join(f"<li>{esc(w)}</li>" for w in warnings) + "</ul></div>") if warnings else ""
    body = "".join(f'<section id="section-{esc(i)}"><h2>{esc(h)}</h2>{content}</section>' for i, h, content in sections)
    return (f'<!DOCTYPE html><html lang="en"><head><meta charset="utf-8"><title>{esc(title)}</title>'
            f"<style>{CSS}</style></head><body><h1>{esc(title)}</h1><nav>{nav}</nav>{warn}{body}</body></html>\n")
