"use strict";
// The build report's script: it inflates the inline data and draws the lists a page at a time,
// so that a build of 100,000 assets opens as fast as a small one. It loads nothing.
(function () {
  const PAGE = 50;
  const LINKS = 24;  // bundles named in a row before a "more" button
  const byId = (id) => document.getElementById(id);

  function el(tag, props, ...children) {
    const node = document.createElement(tag);
    for (const [key, value] of Object.entries(props || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (key === "class") node.className = value;
      else if (key === "text") node.textContent = value;
      else if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
      else node.setAttribute(key, value === true ? "" : value);
    }
    node.append(...nodes(children));
    return node;
  }

  // Children as nodes: nested lists flattened, absent ones (null, false) left out.
  function nodes(children) {
    return children.flat(Infinity)
      .filter((child) => child !== undefined && child !== null && child !== false)
      .map((child) => (child instanceof Node ? child : document.createTextNode(String(child))));
  }
  const fill = (container, ...children) => container.replaceChildren(...nodes(children));

  const int = (n) => Number(n).toLocaleString("en-US");
  function bytes(n) {
    const units = ["B", "KB", "MB", "GB"];
    let value = n, unit = 0;
    while (Math.abs(value) >= 1024 && unit < units.length - 1) { value /= 1024; unit++; }
    return unit === 0 ? `${value} B` : `${value.toFixed(1)} ${units[unit]}`;
  }
  const signed = (n) => (n > 0 ? "+" : "") + int(n);
  const shown = (value) => (typeof value === "string" ? value : JSON.stringify(value));

  async function inflate(text) {
    if (typeof DecompressionStream === "undefined") {
      throw new Error("this browser cannot read the page's data (it has no DecompressionStream)");
    }
    const binary = atob(text.trim());
    const raw = new Uint8Array(binary.length);
    for (let i = 0; i < binary.length; i++) raw[i] = binary.charCodeAt(i);
    const stream = new Blob([raw]).stream().pipeThrough(new DecompressionStream("gzip"));
    return JSON.parse(await new Response(stream).text());
  }

  // -- a list shown a page at a time, with a filter and sortable columns ----------------------
  function paged(container, options) {
    const { columns, filter, placeholder, empty, pageSize = PAGE } = options;
    let rows = options.rows, visible = rows, page = 0, sortBy = null, descending = false;
    const box = el("div", { class: "paged" });
    const input = filter
      ? el("input", { type: "search", placeholder: placeholder || "filter…", oninput: () => { page = 0; apply(); } })
      : null;
    const count = el("span", { class: "muted" });
    const body = el("div");
    const prev = el("button", { type: "button", text: "‹ previous", onclick: () => { page--; draw(); } });
    const next = el("button", { type: "button", text: "next ›", onclick: () => { page++; draw(); } });
    const where = el("span");
    const toolbar = el("div", { class: "toolbar" }, input, count);
    box.append(toolbar, body, el("div", { class: "pager" }, prev, where, next));
    container.replaceChildren(box);

    function apply() {
      const query = input ? input.value.trim().toLowerCase() : "";
      visible = query ? rows.filter((row) => filter(row, query)) : rows;
      if (sortBy !== null) {
        const key = columns[sortBy].sort;
        visible = visible.slice().sort((a, b) => {
          const x = key(a), y = key(b);
          return (x < y ? -1 : x > y ? 1 : 0) * (descending ? -1 : 1);
        });
      }
      draw();
    }

    function draw() {
      const pages = Math.max(1, Math.ceil(visible.length / pageSize));
      page = Math.min(Math.max(page, 0), pages - 1);
      count.textContent = visible.length === rows.length ? `${int(rows.length)} in all` : `${int(visible.length)} of ${int(rows.length)}`;
      const slice = visible.slice(page * pageSize, (page + 1) * pageSize);
      if (!visible.length) {
        fill(body, el("p", { class: "note", text: rows.length ? "nothing matches" : (empty || "none") }));
      } else if (options.item) {
        fill(body, ...slice.map(options.item));
      } else {
        const head = el("tr", {}, columns.map((column, i) => el("th", {
          class: [column.num ? "num" : "", column.sort ? "sortable" : ""].join(" ").trim() || null,
          title: column.sort ? "sort" : null,
          onclick: column.sort ? () => { descending = sortBy === i ? !descending : !!column.num; sortBy = i; apply(); } : null,
        }, column.title + (sortBy === i ? (descending ? " ▾" : " ▴") : ""))));
        const lines = slice.map((row) => el("tr", {}, columns.map((column) => {
          const cell = column.cell(row);
          return el("td", { class: column.num ? "num" : (column.cls || null) }, cell);
        })));
        fill(body, el("table", {}, el("thead", {}, head), el("tbody", {}, lines)));
      }
      toolbar.hidden = !input && rows.length <= pageSize;  // a short list needs no count
      where.textContent = visible.length > pageSize ? `page ${page + 1} of ${pages}` : "";
      prev.hidden = next.hidden = visible.length <= pageSize;
      prev.disabled = page === 0;
      next.disabled = page >= pages - 1;
    }

    apply();
    return { set(newRows) { rows = newRows; page = 0; apply(); } };
  }

  function main(C, R) {
    const A = C.assets, B = C.bundles, V = C.validation;
    const assetCount = A.id.length;
    const heldBy = (i) => { const b = A.bundle[i]; return Array.isArray(b) ? b : (b >= 0 ? [b] : []); };
    const assetLabel = (i) => A.name[i] || A.id[i];
    const assetIndex = new Map();
    for (let i = 0; i < assetCount; i++) assetIndex.set(A.id[i], i);

    // A bundle's file: its name and hash digits, its name, or spelt out (pagedata.py).
    const fileOf = (b) => (B.file[b] === 0 ? `${B.name[b]}_${B.hash[b]}` : B.file[b] === 1 ? B.name[b] : B.file[b]);
    const bundleLink = (b) => el("a", { class: "link", href: "#bundles", onclick: (e) => { e.preventDefault(); showBundle(b); } }, B.name[b]);
    const whyLink = (i) => el("a", { class: "link", href: "#why", onclick: (e) => { e.preventDefault(); explain(i); } }, "why?");
    const assetLink = (id) => {
      const i = assetIndex.get(id);
      return i === undefined ? el("code", {}, id) : el("a", { class: "link", href: "#why", title: id, onclick: (e) => { e.preventDefault(); explain(i); } }, assetLabel(i));
    };

    // -- bundles -------------------------------------------------------------------------------
    const bundleRows = B.name.map((_, i) => i).sort((a, b) => B.size[b] - B.size[a]);
    paged(byId("bundle-table"), {
      rows: bundleRows,
      filter: (b, q) => B.name[b].toLowerCase().includes(q) || fileOf(b).toLowerCase().includes(q),
      placeholder: "filter bundles by name or file…",
      empty: "no bundles",
      columns: [
        { title: "bundle", cell: (b) => [bundleLink(b), B.errors[b] ? el("span", { class: "sev error", text: " unreadable" }) : null], sort: (b) => B.name[b] },
        { title: "kind", cell: (b) => B.kind[b], sort: (b) => B.kind[b] },
        { title: "size", num: true, cell: (b) => bytes(B.size[b]), sort: (b) => B.size[b] },
        { title: "assets", num: true, cell: (b) => int(B.assets[b].length), sort: (b) => B.assets[b].length },
        { title: "depends on", num: true, cell: (b) => int(B.deps[b].length), sort: (b) => B.deps[b].length },
        { title: "needed by", num: true, cell: (b) => int(B.rdeps[b].length), sort: (b) => B.rdeps[b].length },
        { title: "file", cls: "mono wrap", cell: (b) => fileOf(b) },
      ],
    });

    function showBundle(b) {
      const box = byId("bundle-detail");
      const links = (list) => {
        if (!list.length) return el("span", { class: "muted", text: "none" });
        const box = el("span", { class: "links" }, list.slice(0, LINKS).map(bundleLink));
        if (list.length > LINKS) {
          const more = el("button", { type: "button", text: `${int(list.length - LINKS)} more`, onclick: () => { more.replaceWith(...list.slice(LINKS).map(bundleLink)); } });
          box.append(more);
        }
        return el("span", {}, `${int(list.length)}: `, box);
      };
      const nx = B.explicit[b], members = B.assets[b];
      box.hidden = false;
      fill(box,
        el("h3", {}, `Bundle ${B.name[b]}`),
        el("dl", { class: "kv" },
          el("dt", {}, "file"), el("dd", { class: "mono" }, fileOf(b)),
          el("dt", {}, "kind"), el("dd", {}, B.kind[b]),
          el("dt", {}, "size"), el("dd", {}, `${bytes(B.size[b])} (${int(B.size[b])} bytes)`),
          el("dt", {}, "content hash"), el("dd", { class: "mono", title: "the first 32 hex digits" }, `${B.hash[b]}…`),
          el("dt", {}, "assets"), el("dd", {}, `${int(members.length)}: ${int(nx)} placed by the layout, ${int(members.length - nx)} pulled in as dependencies`),
          el("dt", {}, "depends on"), el("dd", {}, links(B.deps[b])),
          el("dt", {}, "needed by"), el("dd", {}, links(B.rdeps[b])),
          B.usedBy[b].length ? [el("dt", {}, "used by"), el("dd", {}, links(B.usedBy[b]))] : null,
          B.errors[b] ? [el("dt", {}, "problem"), el("dd", { class: "sev error" }, B.errors[b])] : null,
        ),
        el("div", { id: "bundle-assets" }),
      );
      const role = new Map(members.map((a, k) => [a, k < nx ? "layout" : "dependency"]));
      paged(byId("bundle-assets"), {
        rows: members,
        filter: (a, q) => assetLabel(a).toLowerCase().includes(q) || A.id[a].toLowerCase().includes(q),
        placeholder: "filter assets…",
        columns: [
          { title: "virtual path", cls: "wrap", cell: (a) => assetLabel(a), sort: (a) => assetLabel(a) },
          { title: "id", cls: "mono wrap", cell: (a) => A.id[a], sort: (a) => A.id[a] },
          { title: "type", cell: (a) => A.types[A.type[a]], sort: (a) => A.types[A.type[a]] },
          { title: "stored", num: true, cell: (a) => bytes(A.size[a]), sort: (a) => A.size[a] },
          { title: "payload", num: true, cell: (a) => bytes(A.raw[a]), sort: (a) => A.raw[a] },
          { title: "placed by", cell: (a) => role.get(a), sort: (a) => role.get(a) },
          { title: "", cell: (a) => whyLink(a) },
        ],
      });
      document.querySelectorAll(".treemap .tile.selected").forEach((t) => t.classList.remove("selected"));
      const tile = document.querySelector(`.treemap .tile[data-bundle="${b}"]`);
      if (tile) tile.classList.add("selected");
      box.scrollIntoView({ block: "nearest" });
    }

    document.querySelectorAll(".treemap .tile").forEach((tile) => {
      const open = () => {
        const b = Number(tile.dataset.bundle);
        if (b >= 0) showBundle(b); else byId("bundle-table").scrollIntoView();
      };
      tile.addEventListener("click", open);
      tile.addEventListener("keydown", (e) => { if (e.key === "Enter") open(); });
    });

    // -- duplicates ----------------------------------------------------------------------------
    const duplicated = [];
    for (let i = 0; i < assetCount; i++) if (Array.isArray(A.bundle[i])) duplicated.push(i);
    const cost = (i) => A.size[i] * (A.bundle[i].length - 1);
    duplicated.sort((a, b) => cost(b) - cost(a));
    paged(byId("duplicate-table"), {
      rows: duplicated,
      filter: (a, q) => assetLabel(a).toLowerCase().includes(q) || A.id[a].toLowerCase().includes(q),
      placeholder: "filter assets…",
      empty: "no asset is in more than one bundle",
      columns: [
        { title: "asset", cls: "wrap", cell: (a) => assetLabel(a), sort: (a) => assetLabel(a) },
        { title: "type", cell: (a) => A.types[A.type[a]] },
        { title: "stored", num: true, cell: (a) => bytes(A.size[a]), sort: (a) => A.size[a] },
        { title: "copies", num: true, cell: (a) => A.bundle[a].length, sort: (a) => A.bundle[a].length },
        { title: "extra bytes", num: true, cell: (a) => bytes(cost(a)), sort: cost },
        { title: "in bundles", cell: (a) => el("span", { class: "links" }, A.bundle[a].map(bundleLink)) },
      ],
    });

    // -- rule failures -------------------------------------------------------------------------
    const ruleView = byId("rule-view");
    if (!V) {
      fill(ruleView, el("p", { class: "note", text: "No validation report (reports/validate.json) in this folder." }));
    } else {
      const rowsOf = (key) => {
        const groups = new Map();
        V.rows.forEach((row, r) => { const k = row[key]; if (!groups.has(k)) groups.set(k, []); groups.get(k).push(r); });
        return groups;
      };
      const byRule = rowsOf(0), byFile = rowsOf(1);
      const severity = (rule) => el("span", { class: `sev ${V.severity[rule]}`, text: V.severity[rule] });
      const values = (row) => row[3].length
        ? row[3].map((value, k) => el("div", {}, el("code", {}, shown(value)), row[4][k] != null ? el("span", { class: "muted", text: ` line ${row[4][k]}` }) : null))
        : el("span", { class: "muted", text: "(no values: the check failed as a whole)" });
      const ruleTitle = (rule) => [V.rules[rule], V.ruleNames[rule] ? el("span", { class: "muted", text: ` — ${V.ruleNames[rule]}` }) : null];
      const lazyTable = (details, columns, rows) => {
        details.addEventListener("toggle", () => {
          if (!details.open || details.dataset.drawn) return;
          details.dataset.drawn = "1";
          const holder = el("div");
          details.append(holder);
          paged(holder, { rows, columns });
        });
      };
      const ruleItem = ([rule, rows]) => {
        const details = el("details", { class: "group" }, el("summary", {}, severity(rule), " ", ruleTitle(rule), el("span", { class: "muted", text: ` · ${int(rows.length)} file(s)` })));
        lazyTable(details, [
          { title: "file", cls: "mono wrap", cell: (r) => V.sources[V.rows[r][1]] },
          { title: "failing values", cell: (r) => values(V.rows[r]) },
          { title: "via", cls: "mono wrap", cell: (r) => (V.rows[r][2] >= 0 ? V.sources[V.rows[r][2]] : "") },
          { title: "message", cell: (r) => V.rows[r][5] || V.ruleNames[rule] || "" },
        ], rows);
        return details;
      };
      const fileItem = ([source, rows]) => {
        const details = el("details", { class: "group" }, el("summary", {}, el("code", {}, V.sources[source]), el("span", { class: "muted", text: ` · ${int(rows.length)} failure(s)` })));
        lazyTable(details, [
          { title: "rule", cell: (r) => [severity(V.rows[r][0]), " ", ruleTitle(V.rows[r][0])] },
          { title: "failing values", cell: (r) => values(V.rows[r]) },
          { title: "message", cell: (r) => V.rows[r][5] || "" },
        ], rows);
        return details;
      };
      const rank = { error: 0, warning: 1, info: 2 };
      const ruleGroups = [...byRule.entries()].sort((a, b) => (rank[V.severity[a[0]]] - rank[V.severity[b[0]]]) || (b[1].length - a[1].length));
      const fileGroups = [...byFile.entries()].sort((a, b) => b[1].length - a[1].length);
      const list = el("div");
      const ruleButton = el("button", { type: "button", "aria-pressed": "true", text: `by rule (${byRule.size})` });
      const fileButton = el("button", { type: "button", "aria-pressed": "false", text: `by file (${byFile.size})` });
      const show = (which) => {
        ruleButton.setAttribute("aria-pressed", String(which === "rule"));
        fileButton.setAttribute("aria-pressed", String(which === "file"));
        if (which === "rule") {
          paged(list, { rows: ruleGroups, item: ruleItem, filter: ([rule], q) => V.rules[rule].toLowerCase().includes(q) || V.ruleNames[rule].toLowerCase().includes(q), placeholder: "filter rules…", empty: "no rule failed" });
        } else {
          paged(list, { rows: fileGroups, item: fileItem, filter: ([source], q) => V.sources[source].toLowerCase().includes(q), placeholder: "filter files…", empty: "no rule failed" });
        }
      };
      ruleButton.addEventListener("click", () => show("rule"));
      fileButton.addEventListener("click", () => show("file"));
      const c = V.counts;
      fill(ruleView,
        el("p", {}, `${int(c.rules)} rules, ${int(c.checked)} checks: ${int(c.failures)} failures (`, el("span", { class: "sev error", text: `${c.error} error` }), ", ", el("span", { class: "sev warning", text: `${c.warning} warning` }), ", ", el("span", { class: "sev info", text: `${c.info} info` }), `), ${c.broken} broken rules.`),
        el("div", { class: "toolbar" }, ruleButton, fileButton),
        list,
        V.ruleErrors.length ? [el("h3", {}, "Broken rules (they checked nothing; they count as errors)"), el("ul", {}, V.ruleErrors.map((e) => el("li", {}, el("b", {}, e.rule), `: ${e.message}`)))] : null,
        V.skipped.length ? [el("h3", {}, "Skipped rules"), el("ul", {}, V.skipped.map((e) => el("li", {}, el("b", {}, e.rule), `: ${e.reason}`)))] : null,
        V.warnings.length ? [el("h3", {}, "Warnings about rules"), el("ul", {}, V.warnings.map((e) => el("li", {}, el("b", {}, e.rule), `: ${e.message}`)))] : null,
      );
      show("rule");
    }

    // -- missing and ambiguous references ------------------------------------------------------
    const namedIn = new Map();
    const wanted = new Set([...C.missing, ...C.ambiguous].map(([id]) => id));
    if (V && wanted.size) {
      V.rows.forEach((row, r) => row[3].forEach((value, k) => {
        if (typeof value === "string" && wanted.has(value)) {
          if (!namedIn.has(value)) namedIn.set(value, []);
          namedIn.get(value).push([r, row[4][k]]);
        }
      }));
    }
    const chainOf = (text) => { const at = text.indexOf("chain "); return at < 0 ? [] : text.slice(at + 6).split(" > ").map((s) => s.replace(/ \(.*\)$/, "")); };
    const referenceTable = (rows, empty) => {
      const holder = el("div");
      paged(holder, {
        rows,
        empty,
        filter: ([id, text], q) => id.toLowerCase().includes(q) || text.toLowerCase().includes(q),
        placeholder: "filter…",
        columns: [
          { title: "reference", cls: "mono wrap", cell: ([id]) => id, sort: ([id]) => id },
          { title: "what is wrong", cls: "wrap", cell: ([, text]) => text.split("; chain ")[0] },
          { title: "named by (the chain that reaches it)", cell: ([id, text]) => {
            const chain = chainOf(text);
            if (chain.length) return el("span", {}, chain.map((step, k) => [k ? " › " : "", assetLink(step)]));
            return assetIndex.has(id) ? el("span", {}, "in the build as ", assetLink(id)) : "";
          } },
          { title: "named in", cls: "mono wrap", cell: ([id]) => (namedIn.get(id) || []).map(([r, line]) => el("div", {}, `${V.sources[V.rows[r][1]]}${line != null ? ":" + line : ""}`, el("span", { class: "muted", text: ` (${V.rules[V.rows[r][0]]})` }))) },
        ],
      });
      return holder;
    };
    fill(byId("reference-view"),
      el("h3", {}, `Missing (${C.missing.length})`), referenceTable(C.missing, "no missing references"),
      el("h3", {}, `Ambiguous (${C.ambiguous.length})`), referenceTable(C.ambiguous, "no ambiguous references"),
      el("h3", {}, `Left out by never_cook (${C.neverCook.length})`), referenceTable(C.neverCook, "none"),
      el("h3", {}, `Reference cycles (${C.cycles.length})`),
      C.cycles.length ? el("ul", {}, C.cycles.map((cycle) => el("li", {}, cycle.map((id, k) => [k ? " › " : "", assetLink(id)])))) : el("p", { class: "note", text: "none" }),
      C.bundleCycles.length ? [el("h3", {}, `Bundle dependency cycles (${C.bundleCycles.length})`), el("ul", {}, C.bundleCycles.map((cycle) => el("li", {}, cycle.join(" › "))))] : null,
    );

    // -- why is it in the build ----------------------------------------------------------------
    let lowered = null;
    const search = byId("why-search"), results = byId("why-results");
    function chain(i) {
      if (A.parent[i] === -3) return C.chains[i];
      const steps = [i];
      for (let at = i, guard = 0; A.parent[at] >= 0 && guard < 100000; guard++) { at = A.parent[at]; steps.push(at); }
      return steps.reverse();
    }
    function explain(i) {
      search.value = A.name[i] || A.id[i];
      fill(results, answer(i));
      byId("why").scrollIntoView({ block: "start" });
    }
    function answer(i) {
      const box = el("div", { class: "detail" }, el("h3", {}, assetLabel(i)), el("div", { class: "mono muted" }, A.id[i]));
      if (A.parent[i] === -2) {
        box.append(el("p", {}, "Not in the cook list: no chain reaches it."));
        return box;
      }
      const steps = chain(i);
      const rootKinds = C.roots[steps[0]];
      box.append(
        el("p", {}, steps.length === 1 ? "A cook root" : `Reached in ${steps.length - 1} reference(s) from the root ${assetLabel(steps[0])}`, rootKinds ? ` (root from ${rootKinds})` : "", ":"),
        el("ol", { class: "chain" }, steps.map((s) => el("li", {},
          s === i ? el("b", {}, assetLabel(s)) : el("a", { class: "link", onclick: () => explain(s) }, assetLabel(s)),
          el("span", { class: "muted", text: ` · ${A.types[A.type[s]] || "?"} · ` }), el("code", {}, A.id[s]),
          heldBy(s).length ? [el("span", { class: "muted", text: " · in " }), el("span", { class: "links" }, heldBy(s).map(bundleLink))] : null,
        ))),
      );
      return box;
    }
    let timer = 0;
    function find() {
      const query = search.value.trim().toLowerCase();
      if (!query) { fill(results); return; }
      if (lowered === null) lowered = A.id.map((id, i) => `${id}\u0000${A.name[i]}`.toLowerCase());
      const exact = assetIndex.get(search.value.trim());
      const found = exact !== undefined ? [exact] : [];
      for (let i = 0; i < assetCount && found.length < 30; i++) if (i !== exact && lowered[i].includes(query)) found.push(i);
      const missing = C.missing.filter(([id]) => id.toLowerCase().includes(query)).slice(0, 5);
      if (found.length === 1 && !missing.length) { fill(results, answer(found[0])); return; }
      fill(results,
        found.length || missing.length ? el("ul", {},
          found.map((i) => el("li", {}, el("a", { class: "link", onclick: () => fill(results, answer(i)) }, assetLabel(i)), el("span", { class: "muted", text: ` · ${A.id[i]}` }))),
          missing.map(([id, text]) => el("li", {}, el("code", {}, id), el("span", { class: "sev error", text: " missing: " }), text)),
        ) : el("p", { class: "note", text: "no asset matches" }),
        found.length === 30 ? el("p", { class: "note", text: "the first 30 matches; type more to narrow" }) : null,
      );
    }
    search.addEventListener("input", () => { clearTimeout(timer); timer = setTimeout(find, 120); });
    search.addEventListener("keydown", (e) => { if (e.key === "Enter") { clearTimeout(timer); find(); } });

    // -- changes since the previous build ------------------------------------------------------
    const changeView = byId("change-view");
    const parts = [];
    const changes = R.changes || { status: "first" };
    const previous = R.previousRun;
    const previousText = previous ? `run ${previous.run} (started ${previous.started}, exit ${previous.exit_code}, ${previous.seconds} s)` : "the previous build";
    if (changes.status === "first") parts.push(el("p", { class: "note", text: "The first build of this output folder: there is no earlier build to compare with." }));
    else if (changes.status === "same") parts.push(el("p", {}, `The outputs are the same as those of ${previousText}: a patch would ship nothing.`));
    else if (changes.status === "unknown") parts.push(el("p", { class: "note", text: "The previous build's state could not be read, so the outputs cannot be compared." }));
    else {
      const D = changes.diff, T = D.totals;
      parts.push(el("p", {}, `Against ${previousText}: ${T["bundles.added"]} bundle(s) added, ${T["bundles.removed"]} removed, ${T["bundles.changed"]} changed; ${T["assets.added"]} asset(s) added, ${T["assets.removed"]} removed, ${T["assets.moved"]} moved, ${T["assets.changed"]} changed in content. A patch downloads ${bytes(D.download_bytes)} in ${D.files.length} file(s).`));
      const table = (title, total, rows, columns) => {
        if (!total) return;
        const holder = el("div");
        parts.push(el("h3", {}, `${title} (${int(total)})`), holder);
        if (total > rows.length) parts.push(el("p", { class: "note", text: `the first ${int(rows.length)} are listed` }));
        paged(holder, { rows, columns, pageSize: 20 });
      };
      const bundleColumns = [
        { title: "bundle", cell: (c) => c.bundle },
        { title: "old", cls: "mono wrap", cell: (c) => (c.old ? `${c.old.content_hash.slice(0, 16)} · ${bytes(c.old.size)}` : "") },
        { title: "new", cls: "mono wrap", cell: (c) => (c.new ? `${c.new.content_hash.slice(0, 16)} · ${bytes(c.new.size)}` : "") },
        { title: "bytes", num: true, cell: (c) => signed(c.delta) },
      ];
      const assetColumns = [
        { title: "asset", cls: "wrap", cell: (c) => c.name || c.asset },
        { title: "id", cls: "mono wrap", cell: (c) => c.asset },
        { title: "bundles before", cell: (c) => c.old_bundles.join(", ") },
        { title: "bundles now", cell: (c) => c.new_bundles.join(", ") },
      ];
      table("Bundles added", T["bundles.added"], D.bundles.added, bundleColumns);
      table("Bundles removed", T["bundles.removed"], D.bundles.removed, bundleColumns);
      table("Bundles changed", T["bundles.changed"], D.bundles.changed, bundleColumns);
      table("Assets added", T["assets.added"], D.assets.added, assetColumns);
      table("Assets removed", T["assets.removed"], D.assets.removed, assetColumns);
      table("Assets moved between bundles", T["assets.moved"], D.assets.moved, assetColumns);
      table("Assets changed in content", T["assets.changed"], D.assets.changed, assetColumns.concat([{ title: "stored bytes", num: true, cell: (c) => signed(c.delta) }]));
      const linkRows = D.link_xml.added.map((t) => ["+", t]).concat(D.link_xml.removed.map((t) => ["-", t]));
      table("link.xml", linkRows.length, linkRows, [{ title: "", cell: (r) => el("span", { class: r[0] === "+" ? "added" : "removed", text: r[0] }) }, { title: "type", cls: "mono", cell: (r) => r[1] }]);
      table("Files a patch downloads", D.files.length, D.files, [{ title: "file", cls: "mono wrap", cell: (f) => f.file }, { title: "size", num: true, cell: (f) => bytes(f.size) }, { title: "why", cell: (f) => f.why }]);
      table("Files a patch deletes", D.deleted_files.length, D.deleted_files, [{ title: "file", cls: "mono wrap", cell: (f) => f }]);
    }
    const ran = R.ran;
    if (ran) {
      parts.push(el("h3", {}, `Why units ran (${int(ran.total)})`));
      if (!ran.total) parts.push(el("p", {}, "No unit ran: every result came from the cache."));
      else {
        const reasons = el("div");
        parts.push(reasons);
        paged(reasons, { rows: ran.reasons, pageSize: 20, columns: [
          { title: "stage", cell: (r) => r.stage, sort: (r) => r.stage },
          { title: "reason", cell: (r) => r.kind, sort: (r) => r.kind },
          { title: "units", num: true, cell: (r) => int(r.count), sort: (r) => r.count },
          { title: "for example", cls: "wrap", cell: (r) => r.example },
        ] });
        const units = el("div");
        parts.push(el("p", { class: "hint", text: ran.listed < ran.total ? `The first ${int(ran.listed)} of ${int(ran.total)} units that ran:` : "Every unit that ran:" }), units);
        paged(units, { rows: ran.units, filter: (u, q) => u.unit.toLowerCase().includes(q) || u.reason.toLowerCase().includes(q) || u.stage.includes(q), placeholder: "filter units…", columns: [
          { title: "stage", cell: (u) => u.stage, sort: (u) => u.stage },
          { title: "unit", cls: "mono wrap", cell: (u) => u.unit, sort: (u) => u.unit },
          { title: "why it ran", cls: "wrap", cell: (u) => u.reason, sort: (u) => u.reason },
          { title: "worker", cell: (u) => u.worker, sort: (u) => u.worker },
          { title: "time", num: true, cell: (u) => (u.seconds < 1 ? `${(u.seconds * 1000).toFixed(1)} ms` : `${u.seconds.toFixed(2)} s`), sort: (u) => u.seconds },
        ] });
      }
    }
    if (previous && Object.keys(previous.stages).length) {
      const stageRows = [...document.querySelectorAll("table.stages tbody tr")].map((tr) => tr.cells[0].textContent);
      const holder = el("div");
      parts.push(el("h3", {}, "Stages against the previous run"), holder);
      const now = new Map([...document.querySelectorAll("table.stages tbody tr")].map((tr) => [tr.cells[0].textContent, { built: Number(tr.cells[3].textContent.replace(/,/g, "")), seconds: Number(tr.cells[5].textContent) }]));
      paged(holder, { rows: stageRows, columns: [
        { title: "stage", cell: (s) => s },
        { title: "built before", num: true, cell: (s) => (previous.stages[s] ? int(previous.stages[s].built) : "–") },
        { title: "built now", num: true, cell: (s) => int(now.get(s).built) },
        { title: "seconds before", num: true, cell: (s) => (previous.stages[s] ? previous.stages[s].seconds.toFixed(2) : "–") },
        { title: "seconds now", num: true, cell: (s) => now.get(s).seconds.toFixed(2) },
      ] });
    }
    fill(changeView, ...parts);

    // -- link.xml ------------------------------------------------------------------------------
    fill(byId("linkxml-view"), C.linkXml === null
      ? el("p", { class: "note", text: "No link.xml in this folder." })
      : el("div", {}, el("p", {}, `${C.linkXml.length} Type(s) preserved from code stripping:`), el("ul", {}, C.linkXml.map((t) => el("li", {}, el("code", {}, t))))));
  }

  async function start() {
    try {
      const content = await inflate(byId("content-data").textContent);
      const run = await inflate(byId("run-data").textContent);
      main(content, run);
      performance.mark("report-ready");
      document.body.dataset.ready = "true";
    } catch (error) {
      document.body.dataset.ready = "error";
      document.querySelector("main").prepend(el("p", { class: "note bad", text: `The page could not be drawn: ${error.message}` }));
      throw error;
    }
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();
