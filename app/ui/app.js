// The forecast and recurrence inspector (app/ui/index.html): calls the service's /v1 API from the
// browser and draws its answers, the forecast with uPlot (vendored) and the attention on <canvas>.
// No build step, no other host: everything it loads comes from /ui/static.
"use strict";

(() => {
  // What the page holds, also read by the browser tests (tests/app/ui): the API key lives here and
  // nowhere else (not in storage, not in the address).
  const state = {
    key: "",
    models: [],
    model: null, // the chosen model's entry of GET /v1/models
    version: null, // the chosen version's entry
    input: null, // the parsed data: {values, start, id, horizon}
    forecast: null, // {request, response}
    attention: null, // {request, response}
    plots: [], // one uPlot per channel
    timings: {},
  };
  window.__rsaState = state;

  const $ = (id) => document.getElementById(id);
  const MATRICES = ["softmax", "rem", "mixed"];
  const MATRIX_TITLES = { softmax: "softmax attention", rem: "REM", mixed: "mixed: (1 − g)·softmax + g·REM" };

  // ---------------------------------------------------------------------------------------------
  // The model's kind. Manifests that have it say so in `architecture.kind`; older ones are told apart
  // by their fields: a model whose head reads the last step (`head` "state" or "last") with no linear
  // residual is read at its last step, and when every head is a REM head (no plain softmax head) it is
  // RSA's recurrence half: fixed REM kernels read at the last step with a least-squares read-out
  // ("rem_readout"). Anything else is a full RSA-Transformer: gated softmax attention mixed with REM.
  function modelKind(version) {
    if (version.panel) return version.kind || "global_readout"; // a global model: no attention heads
    const arch = version.architecture || {};
    if (arch.kind) return arch.kind;
    const heads = (version.layers || []).flatMap((layer) => layer.heads);
    const lastStep = (arch.head === "state" || arch.head === "last") && arch.linear_residual === false;
    const allRem = heads.length > 0 && heads.every((h) => h.kind !== "softmax");
    return lastStep && allRem ? "rem_readout" : "rsa_transformer";
  }
  const KIND_TEXT = {
    rem_readout: "REM read-out: fixed REM kernels read at the last step, least-squares read-out",
    rsa_transformer: "RSA-Transformer: gated softmax attention mixed with REM",
    global_readout: "global REM read-out: one closed-form read-out for any series of its frequency (inspected as lag weights and kernel shares)",
    global_transformer: "global RSA-Transformer: one trained network for any series of its frequency (not refit on request; its attention heads inspected)",
  };

  // ---------------------------------------------------------------------------------------------
  // The API. Every call carries the key when one was typed; errors keep the API's own shape.
  class ApiError extends Error {
    constructor(status, error) {
      super(error.message);
      this.status = status;
      this.code = error.code;
      this.field = error.field;
    }
  }

  async function api(method, path, body) {
    const headers = {};
    if (body !== undefined) headers["content-type"] = "application/json";
    if (state.key) headers.authorization = `Bearer ${state.key}`;
    const response = await fetch(path, {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    if (!response.ok) {
      let error = { code: "http_error", message: `${response.status} ${response.statusText}` };
      try {
        error = (await response.json()).error || error;
      } catch (_) {
        /* not the API's error shape: keep the status line */
      }
      throw new ApiError(response.status, error);
    }
    return response;
  }

  // Where the API's error goes: the input that holds the field it names.
  function slotFor(error) {
    if (error.code === "unauthenticated" || error.code === "forbidden") return "key";
    const field = error.field || "";
    if (/^series(\[\d+\])?\.start/.test(field)) return "start";
    if (/^series(\[\d+\])?\.(future|past|static)/.test(field)) return "covariates";
    if (field.startsWith("series")) return "data";
    if (field === "horizon") return "horizon";
    if (field.startsWith("level") || field.startsWith("quantiles")) return "levels";
    if (field === "channel") return "channel";
    if (field.startsWith("matrices") || field.startsWith("layers")) return "attention";
    if (error.code === "model_not_found" || error.code === "version_not_found") return "model";
    return "general";
  }
  const SLOT_INPUTS = { key: "api-key", data: "data", start: "start", horizon: "horizon", channel: "channel" };

  function showError(slot, message, field) {
    const box = document.querySelector(`[data-error-for="${slot}"]`);
    box.textContent = message;
    if (field) box.dataset.field = field;
    const input = SLOT_INPUTS[slot] && $(SLOT_INPUTS[slot]);
    if (input) input.setAttribute("aria-invalid", "true");
  }

  function showApiError(error) {
    if (error instanceof ApiError) showError(slotFor(error), error.message, error.field);
    else showError("general", String(error.message || error));
  }

  function clearErrors(slots) {
    for (const box of document.querySelectorAll("[data-error-for]")) {
      if (slots && !slots.includes(box.dataset.errorFor)) continue;
      box.textContent = "";
      delete box.dataset.field;
      const input = SLOT_INPUTS[box.dataset.errorFor] && $(SLOT_INPUTS[box.dataset.errorFor]);
      if (input) input.removeAttribute("aria-invalid");
    }
  }

  // ---------------------------------------------------------------------------------------------
  // Models and versions.
  async function loadModels() {
    clearErrors(["key", "model"]);
    let list;
    try {
      list = await (await api("GET", "/v1/models")).json();
    } catch (error) {
      showApiError(error);
      return;
    }
    state.models = list.models;
    const select = $("model");
    select.replaceChildren(...state.models.map((m) => new Option(m.name, m.name)));
    const wanted = decodeURIComponent(location.pathname.replace(/^\/ui\/?/, "").split("/")[0] || "");
    if (wanted && !state.models.some((m) => m.name === wanted)) {
      showError("model", `model ${wanted} is not served here; the service has: ${state.models.map((m) => m.name).join(", ")}`);
    } else if (wanted) {
      select.value = wanted;
    }
    chooseModel();
  }

  function chooseModel() {
    state.model = state.models.find((m) => m.name === $("model").value) || null;
    const versions = state.model ? state.model.versions.filter((v) => v.state === "ready") : [];
    $("version").replaceChildren(
      ...versions.map((v) => new Option(v.version === state.model.latest_version ? `${v.version} (latest)` : `${v.version}`, v.version)),
    );
    if (state.model && state.model.latest_version != null) $("version").value = state.model.latest_version;
    if (state.model && versions.length === 0) {
      const states = state.model.versions.map((v) => `version ${v.version}: ${v.state}${v.error ? ` (${v.error})` : ""}`);
      showError("model", `model ${state.model.name} has no ready version yet; reload the page later. ${states.join("; ")}`);
    }
    if (state.model && location.pathname !== `/ui/${encodeURIComponent(state.model.name)}`) {
      history.replaceState(null, "", `/ui/${encodeURIComponent(state.model.name)}`);
    }
    chooseVersion();
  }

  function chooseVersion() {
    const number = Number($("version").value);
    state.version = state.model ? state.model.versions.find((v) => v.version === number) || null : null;
    const v = state.version;
    const info = $("model-info");
    if (!v) {
      info.replaceChildren();
      return;
    }
    const kind = modelKind(v);
    const heads = (v.layers || []).flatMap((layer) => layer.heads);
    const counts = {};
    for (const h of heads) counts[h.kind] = (counts[h.kind] || 0) + 1;
    const rows = [
      ["kind", KIND_TEXT[kind] || kind, "kind"],
      ["input length L", `${v.input_length}`],
      ["horizon H", `${v.horizon}`],
      ["channels", (v.channels || []).join(", ")],
      ["time zone", modelZone(v) ? `${modelZone(v)}: times without an offset (the data's, start) are read there; answers show its offsets` : "UTC: times without an offset are read as UTC (the model has no zone)", "zone"],
      ["frequency", v.cycle ? `${v.frequency}, seasonal cycle of ${v.cycle.period} steps (needs start)` : `${v.frequency}`],
      ["calibrated levels", v.intervals ? v.intervals.levels.map((l) => `${l}%`).join(", ") : "none"],
      ...(v.panel ? [] : [["heads", `${heads.length} in ${(v.layers || []).length} layer(s): ${Object.entries(counts).map(([k, n]) => `${n} ${k}`).join(", ")}`]]),
    ];
    if (v.architecture && v.architecture.description) rows.splice(1, 0, ["description", v.architecture.description]);
    if (v.metrics && v.metrics.test_mse != null) rows.push(["test MSE", `${Number(v.metrics.test_mse).toFixed(4)}`]);
    rows.push(["provider", v.provider || "?"]);
    info.replaceChildren(
      ...rows.flatMap(([term, text, cls]) => {
        const dt = document.createElement("dt");
        dt.textContent = term;
        const dd = document.createElement("dd");
        dd.textContent = text;
        if (cls) dd.className = cls;
        dd.dataset.term = term;
        return [dt, dd];
      }),
    );
    info.dataset.kind = kind;
    $("horizon").value = v.horizon;
    $("horizon").max = v.horizon;
    const levels = $("levels");
    const boxes = (v.intervals ? v.intervals.levels : []).map((level) => {
      const label = document.createElement("label");
      const box = document.createElement("input");
      box.type = "checkbox";
      box.value = level;
      box.checked = level === 80 || level === 95;
      label.append(box, ` ${level}%`);
      return label;
    });
    const legend = document.createElement("legend");
    legend.textContent = "intervals";
    levels.replaceChildren(legend, ...(boxes.length ? boxes : [document.createTextNode("none calibrated")]));
    showCovariates(v);
    $("channel").replaceChildren(...(v.channels || []).map((c, i) => new Option(c, i)));
    const target = v.dataset && v.dataset.target;
    if (target && v.channels.includes(target)) $("channel").value = v.channels.indexOf(target);
  }

  // ---------------------------------------------------------------------------------------------
  // Data in: CSV (with or without a header, an optional date column) or JSON (a forecast request, a
  // series, rows or named columns). Cells that are not numbers are sent as they are, so that the API
  // refuses them in its own words, naming their position.
  const NUMBER = /^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/;
  const TIME_HEADER = /^(date|time|timestamp|datetime|ds)$/i;

  function parseData(text) {
    const trimmed = text.trim();
    if (!trimmed) throw new Error("no data: paste CSV or JSON, drop a CSV file, or use the example");
    if (trimmed.startsWith("{") || trimmed.startsWith("[")) return parseJson(trimmed);
    return parseCsv(trimmed);
  }

  function parseJson(text) {
    let doc;
    try {
      doc = JSON.parse(text);
    } catch (error) {
      throw new Error(`the data is not valid JSON: ${error.message}`);
    }
    let series = doc;
    let horizon = null;
    if (doc && Array.isArray(doc.series)) {
      series = doc.series[0] || {};
      horizon = doc.horizon ?? null;
    } else if (doc && doc.series && typeof doc.series === "object") {
      series = doc.series;
    } else if (!doc || doc.values === undefined) {
      series = { values: doc };
    }
    return { values: series.values, start: series.start ?? null, id: series.id ?? null, horizon, format: "JSON" };
  }

  function cell(text) {
    if (NUMBER.test(text)) return Number(text);
    return text === "" || /^(nan|null|na)$/i.test(text) ? null : text;
  }

  function parseCsv(text) {
    const numbered = text.split(/\r?\n/).map((line, i) => [line, i + 1]).filter(([line]) => line.trim() !== "");
    const first = numbered[0][0];
    const delimiter = [",", ";", "\t"].reduce((best, d) => (first.split(d).length > first.split(best).length ? d : best), ",");
    const rows = numbered.map(([line]) => line.split(delimiter).map((c) => c.trim().replace(/^"(.*)"$/, "$1")));
    const hasHeader = rows[0].some((c) => c !== "" && !NUMBER.test(c) && Number.isNaN(Date.parse(c)));
    const header = hasHeader ? rows[0] : null;
    let body = hasHeader ? rows.slice(1) : rows;
    const lineOf = numbered.slice(hasHeader ? 1 : 0).map(([, n]) => n);
    let timeColumn = header ? header.findIndex((name) => TIME_HEADER.test(name)) : -1;
    if (timeColumn < 0 && body.length && !NUMBER.test(body[0][0]) && !Number.isNaN(Date.parse(body[0][0]))) timeColumn = 0;
    let reordered = 0;
    if (timeColumn >= 0) {
      const ordered = orderRows(body, lineOf, timeColumn, header ? header[timeColumn] : null, modelZone(state.version));
      body = ordered.rows;
      reordered = ordered.moved;
    }
    const start = timeColumn >= 0 && body.length ? body[0][timeColumn].replace(" ", "T") : null;
    const keep = (row) => row.filter((_, i) => i !== timeColumn);
    let values;
    if (header) {
      values = {};
      keep(header).forEach((name, j) => {
        values[name] = body.map((row) => cell(keep(row)[j] ?? ""));
      });
    } else {
      values = body.map((row) => keep(row).map(cell));
    }
    return { values, start, id: null, horizon: null, format: "CSV", reordered };
  }

  // The trainer's rules for a file's rows (export/data/panels.py, timestamps.py `localize`): a timestamp
  // that repeats is refused, naming both lines; rows out of order are read in time order (as the
  // trainer's `--sort`), and the page says how many moved. Times with an offset are ordered by their
  // instant; naive times by their wall-clock reading, or, for a model with a zone, by their instant
  // there: in the autumn repeat (the same naive time twice) a row is in summer time the first time and
  // in standard time once the clock has gone back (a row not after the previous one, both in the
  // repeat), as the trainer reads it; a time the clocks skip (the spring gap) is refused, as there.
  function orderRows(body, lineOf, column, name, zone) {
    const where = (i) => `line ${lineOf[i]}${name ? `, column '${name}'` : ""}`;
    let previous = null; // the previous row (file order) when it was in a repeat: { wall, summer }
    const keyed = body.map((row, i) => {
      const text = (row[column] ?? "").replace(" ", "T");
      let key = parseTime(text, null);
      if (key == null) throw new Error(`${where(i)}: ${JSON.stringify(row[column] ?? "")} is not a timestamp`);
      let reading = null;
      if (zone && !OFFSET.test(text)) {
        const wall = key * 1000;
        const readings = zoneReadings(wall, zone);
        if (!readings.length) {
          throw new Error(`${where(i)}: ${row[column]} does not exist in ${zone}: the clocks skip it (daylight saving)`);
        }
        const fold = readings.length === 2;
        const summer = !(fold && previous && (wall <= previous.wall || !previous.summer));
        key = (summer ? readings[0] : readings[1]) / 1000;
        if (fold) reading = { wall, summer };
      }
      previous = reading;
      return { row, line: lineOf[i], key, i };
    });
    const sorted = [...keyed].sort((a, b) => a.key - b.key || a.i - b.i);
    for (let k = 1; k < sorted.length; k++) {
      if (sorted[k].key === sorted[k - 1].key) {
        const [a, b] = [sorted[k - 1], sorted[k]].sort((x, y) => x.line - y.line);
        throw new Error(
          `line ${b.line}${name ? `, column '${name}'` : ""}: duplicate timestamp ${b.row[column]} (same as line ${a.line}); ` +
            "each row needs its own time, as in training",
        );
      }
    }
    const moved = sorted.filter((entry, k) => entry.i !== k).length;
    // The first row is never a repeat's second reading (a row read so follows one read earlier), so a
    // naive `start` reads as the service reads it: the repeat's first reading.
    return { rows: sorted.map((entry) => entry.row), moved };
  }

  function readInput() {
    const input = parseData($("data").value);
    state.input = input;
    return input;
  }

  function summarise(input) {
    const v = input.values;
    let text;
    if (Array.isArray(v)) text = `${input.format}: ${v.length} rows of ${Array.isArray(v[0]) ? v[0].length : 1} values`;
    else if (v && typeof v === "object") {
      const names = Object.keys(v);
      text = `${input.format}: ${names.length} columns (${names.join(", ")}) of ${Array.isArray(v[names[0]]) ? v[names[0]].length : "?"} values`;
    } else text = `${input.format}`;
    if (input.start) text += `, first time ${input.start}`;
    if (input.reordered) text += `; rows sorted by time (${input.reordered} were out of order in the file)`;
    if (input.horizon != null) text += ` (its horizon ${input.horizon} is not used: the horizon field below is)`;
    $("data-summary").textContent = text;
  }

  function useText(text) {
    $("data").value = text;
    clearErrors(["data", "start"]);
    try {
      const input = readInput();
      if (input.start) $("start").value = input.start;
      summarise(input);
    } catch (error) {
      showError("data", error.message);
    }
  }

  async function loadExample() {
    const response = await fetch("/ui/static/examples/forecast_request.json");
    useText(await response.text());
  }

  function readFile(file) {
    const reader = new FileReader();
    reader.onload = () => useText(String(reader.result));
    reader.onerror = () => showError("data", `could not read ${file.name}: ${reader.error}`);
    reader.readAsText(file);
  }

  // ---------------------------------------------------------------------------------------------
  // Time. A `start` without an offset is read as the service reads it (docs/service.md, "Time zones"):
  // in the model's zone (manifest `timezone`) when it has one, else UTC; in the autumn repeat, the
  // first reading. Answers carry offsets, and the charts show the model's zone. Steps are the
  // manifest's `frequency_seconds`, or whole months for a calendar frequency (`3MS`, `1ME`).
  function modelZone(version) {
    return (version && (version.timezone || (version.dataset && version.dataset.timezone))) || null;
  }

  const OFFSET_FORMATS = {};
  // The zone's UTC offset at an instant (ms), in ms.
  function zoneOffset(zone, ms) {
    const format = (OFFSET_FORMATS[zone] ||= new Intl.DateTimeFormat("en-US", {
      timeZone: zone, hourCycle: "h23", year: "numeric", month: "2-digit", day: "2-digit",
      hour: "2-digit", minute: "2-digit", second: "2-digit",
    }));
    const p = Object.fromEntries(format.formatToParts(new Date(ms)).map((x) => [x.type, x.value]));
    const wall = Date.UTC(Number(p.year), Number(p.month) - 1, Number(p.day), Number(p.hour), Number(p.minute), Number(p.second));
    return wall - Math.floor(ms / 1000) * 1000;
  }

  const OFFSET = /([zZ]|[+-]\d\d:?\d\d)$/;

  function parseTime(text, zone) {
    if (!text) return null;
    if (OFFSET.test(text)) {
      const ms = Date.parse(text);
      return Number.isNaN(ms) ? null : ms / 1000;
    }
    const wall = Date.parse(`${text}Z`);
    if (Number.isNaN(wall)) return null;
    if (!zone) return wall / 1000;
    const readings = zoneReadings(wall, zone); // in the autumn repeat, the earliest wins
    return (readings.length ? readings[0] : wall - zoneOffset(zone, wall - 86400000)) / 1000;
  }

  // The instants (ms, earliest first) at which the zone's clock reads `wall` (ms of a naive time read
  // as UTC): one, two in the autumn repeat, none in the spring gap. The offsets a day either side are
  // the zone's two around a change; each that maps back onto the wall time is a reading.
  function zoneReadings(wall, zone) {
    const offsets = [...new Set([zoneOffset(zone, wall - 86400000), zoneOffset(zone, wall + 86400000)])];
    return offsets.filter((o) => zoneOffset(zone, wall - o) === o).map((o) => wall - o).sort((a, b) => a - b);
  }

  function offsetText(ms) {
    const m = Math.round(Math.abs(ms) / 60000);
    return `${ms < 0 ? "-" : "+"}${String(Math.floor(m / 60)).padStart(2, "0")}:${String(m % 60).padStart(2, "0")}`;
  }

  // An instant (s) as the zone's wall clock, as a Date whose UTC fields read that clock.
  function wallDate(ts, zone) {
    return new Date(ts * 1000 + (zone ? zoneOffset(zone, ts * 1000) : 0));
  }

  // The service's rule (rsa_core.steps, docs/service.md "Time zones"): a zoned model's whole days and
  // calendar months move its zone's wall clock (a stepped time read as parseTime reads a naive one: the
  // repeat's first reading, a skipped time with the offset before the change); other steps, and every
  // step of a model without a zone, as before (fixed seconds on the instant, months in UTC).
  function stepper(version) {
    const months = /^(\d*)M([SE])$/.exec(version.frequency || "");
    let move = null; // (ms of a wall clock read as UTC, k) -> that wall clock k steps on
    if (months) {
      const n = Number(months[1] || 1);
      const end = months[2] === "E";
      move = (ms, k) => {
        const d = new Date(ms);
        const month = d.getUTCMonth() + n * k;
        const day = end ? 0 : 1; // day 0 of the next month: the month's end
        return Date.UTC(d.getUTCFullYear(), end ? month + 1 : month, day, d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds());
      };
    }
    const seconds = version.frequency_seconds;
    const zone = modelZone(version);
    if (zone && (move || (seconds >= 86400 && seconds % 86400 === 0))) {
      const by = move || ((ms, k) => ms + k * seconds * 1000); // whole days: the wall clock's days
      return (t0, k) => {
        const wall = by(t0 * 1000 + zoneOffset(zone, t0 * 1000), k);
        const readings = zoneReadings(wall, zone);
        return (readings.length ? readings[0] : wall - zoneOffset(zone, wall - 86400000)) / 1000;
      };
    }
    if (move) return (t0, k) => move(t0 * 1000, k) / 1000;
    return (t0, k) => t0 + k * seconds;
  }

  // The window's values per channel, in the model's channel order (only what the model reads: the
  // last L points).
  function windowValues(values, version) {
    const L = version.input_length;
    const flat = Array.isArray(values) && !Array.isArray(values[0]);
    return version.channels.map((name, c) => {
      const column = flat ? values : Array.isArray(values) ? values.map((row) => row[c]) : values[name];
      return column.slice(-L).map(Number);
    });
  }

  function historyLength(values, version) {
    return Array.isArray(values) ? values.length : values[version.channels[0]].length;
  }

  // ---------------------------------------------------------------------------------------------
  // Covariates of a global model (`panel.covariates` in /v1/models; docs/panels.md, "Covariates"):
  // listed with their kind, and gathered from the data for the request: past ones and statics from
  // the columns of their names, future ones from their field or from the CSV rows after the target's
  // last value. What is missing is said here, before any request.
  function sentCovariates(version) {
    return ((version && version.panel && version.panel.covariates) || []).filter((c) => c.kind !== "calendar");
  }

  function showCovariates(version) {
    const all = (version.panel && version.panel.covariates) || [];
    $("covariates").hidden = all.length === 0;
    const H = version.horizon;
    const rows = all.map((c) => {
      const tr = document.createElement("tr");
      tr.dataset.covariate = c.name;
      tr.dataset.kind = c.kind;
      const type = c.categories ? `${c.dtype}: ${c.categories.join(", ")}` : c.dtype;
      for (const text of [c.name, c.kind, type, c.horizon ? "yes" : "no"]) {
        const td = document.createElement("td");
        td.textContent = text;
        tr.append(td);
      }
      const from = document.createElement("td");
      if (c.kind === "future") {
        const field = document.createElement("input");
        field.type = "text";
        field.spellcheck = false;
        field.id = `future-${c.name}`;
        field.dataset.future = c.name;
        field.placeholder = `${H} values, e.g. ${Array.from({ length: Math.min(H, 3) }, () => "0").join(", ")}${H > 3 ? ", …" : ""}`;
        field.setAttribute("aria-label", `${c.name}: ${H} future values`);
        from.append(field);
      } else if (c.kind === "calendar") {
        from.textContent = "derived from the timestamps (needs start)";
      } else {
        from.textContent = c.kind === "past" ? `the data's column ${c.name}` : `the data's column ${c.name} (its last value)`;
      }
      tr.append(from);
      return tr;
    });
    $("covariate-table").tBodies[0].replaceChildren(...rows);
  }

  // {values, future, past, static} of the series for a covariate model; nothing for another. A backtest
  // or anomaly check (evaluation.js) passes `over`: it sends each future covariate over the whole
  // history, its column's values beside the target's and `over` rows after them (the model's H − the
  // steps asked: how far the last window's forecast reads past the history).
  function withCovariates(input, version, over = null) {
    const covs = sentCovariates(version);
    if (!covs.length) return {};
    const H = version.horizon;
    const target = version.channels[0];
    const columns = input.values && !Array.isArray(input.values) && typeof input.values === "object" ? input.values : null;
    const needColumns = covs.filter((c) => c.kind !== "future").map((c) => c.name);
    if (!columns) {
      if (needColumns.length) throw new Error(`the model reads ${needColumns.join(", ")} from the data: give a CSV whose header names ${[target, ...needColumns].join(", ")}`);
    } else if (!columns[target]) {
      throw new Error(`the data has no column ${target}, the model's target (its columns: ${Object.keys(columns).join(", ")})`);
    }
    const all = columns ? columns[target] : input.values;
    // Rows after the target's last value carry future covariates only.
    let n = all.length;
    while (n > 0 && all[n - 1] == null) n -= 1;
    const out = { values: all.slice(0, n) };
    const missing = [];
    for (const c of covs) {
      const column = columns && columns[c.name];
      if (c.kind === "past") {
        if (!column) missing.push(`past covariate ${c.name}: the data has no column ${c.name} (one value per target value)`);
        else (out.past ||= {})[c.name] = column.slice(0, n);
      } else if (c.kind === "static") {
        const value = column ? column.slice(0, n).filter((x) => x != null).pop() : undefined;
        if (value === undefined) missing.push(`static covariate ${c.name}: the data has no column ${c.name} with a value${c.categories ? ` (one of ${c.categories.join(", ")})` : ""}`);
        else (out.static ||= {})[c.name] = value;
      } else if (c.kind === "future" && over != null) {
        // Over a history (a backtest, an anomaly check): one value per target value, then the CSV rows
        // after the last, up to the `over` steps the last windows' H steps read past the history. The
        // answer reads none of those steps: the rows not given are read by the service as the training
        // mean (counted in its `future_unsent`), so they are sent where given and never asked for.
        const given = column ? column.slice(0, n) : [];
        let extra = column ? column.slice(n, n + over) : [];
        const gap = extra.findIndex((x) => x == null);
        if (gap >= 0) extra = extra.slice(0, gap);
        const values = [...given, ...extra];
        const bad = values.find((x) => typeof x !== "number");
        const rows = `one per ${target} value${over ? `, then up to ${over} CSV rows after the last (what the last window's ${H} steps read; those not given are read as the training mean)` : ""}`;
        if (!column) missing.push(`future covariate ${c.name}: the data has no column ${c.name} (${rows})`);
        else if (given.length !== n) missing.push(`future covariate ${c.name}: needs ${n} values, ${rows}; the data has ${given.length}`);
        else if (bad !== undefined) missing.push(`future covariate ${c.name}: ${JSON.stringify(bad)} at row ${values.indexOf(bad) + 1} is not a number`);
        else (out.future ||= {})[c.name] = values;
      } else if (c.kind === "future") {
        const typed = ($(`future-${c.name}`) || { value: "" }).value.trim();
        let values;
        if (typed) {
          values = typed.split(/[\s,;]+/).filter((x) => x !== "").map((x) => (NUMBER.test(x) ? Number(x) : x));
          const bad = values.find((x) => typeof x !== "number");
          if (bad !== undefined) {
            missing.push(`future covariate ${c.name}: ${JSON.stringify(bad)} is not a number`);
            continue;
          }
        } else {
          values = column ? column.slice(n) : [];
        }
        if (values.length !== H) {
          const where = typed ? "typed" : column ? `in ${values.length} CSV rows after the last ${target} value` : "given";
          missing.push(`future covariate ${c.name}: needs ${H} values, one per horizon step; ${values.length} ${where}: type ${H} in its field or add ${H} CSV rows after the last ${target} value`);
        } else (out.future ||= {})[c.name] = values;
      }
    }
    if (missing.length) throw new Error(missing.join("; "));
    return out;
  }

  // ---------------------------------------------------------------------------------------------
  // Submitting: the forecast and the attention, side by side.
  async function submit(event) {
    event.preventDefault();
    clearErrors();
    if (!state.version) {
      showError("general", "choose a model first");
      return;
    }
    let input;
    try {
      input = readInput();
      summarise(input);
    } catch (error) {
      showError("data", error.message);
      return;
    }
    const series = { values: input.values };
    if (input.id != null) series.id = input.id;
    const start = $("start").value.trim();
    if (start) series.start = start;
    try {
      Object.assign(series, withCovariates(input, state.version));
    } catch (error) {
      showError("covariates", error.message);
      return;
    }
    const body = { series: [series] };
    const horizon = $("horizon").value.trim();
    if (horizon !== "") body.horizon = Number.isNaN(Number(horizon)) ? horizon : Number(horizon);
    const levels = [...$("levels").querySelectorAll("input:checked")].map((box) => Number(box.value));
    if (levels.length) body.level = levels;
    $("submit").disabled = true;
    $("status").textContent = "asking the service…";
    try {
      // A global model answers its lag weights and what makes its forecast (its covariates sent too).
      await Promise.all([runForecast(body), runAttention(state.version.panel ? series : null)]);
    } finally {
      $("submit").disabled = false;
    }
  }

  function versionPath(op) {
    return `/v1/models/${encodeURIComponent(state.model.name)}/versions/${state.version.version}/${op}`;
  }

  // Calls the version's `op` route and shows the answer in `view` (`render(answer, version)`), keeping it
  // in state[op]; the marks around the request, the parse and the drawing are what measure(op) reads.
  async function runTimed(op, body, view, render) {
    const version = state.version;
    performance.mark(`${op}-request`);
    const response = await api("POST", versionPath(op), body);
    performance.mark(`${op}-response`);
    const answer = await response.json();
    performance.mark(`${op}-parsed`);
    state[op] = { request: body, response: answer };
    $(view).hidden = false;
    render(answer, version);
    await nextPaint();
    performance.mark(`${op}-rendered`);
    state.timings[op] = measure(op);
  }

  async function runForecast(body) {
    try {
      await runTimed("forecast", body, "forecast-view", (answer, version) =>
        renderForecast(body.series[0], answer, version),
      );
      $("status").textContent = "";
    } catch (error) {
      showApiError(error);
      $("status").textContent = "";
    }
  }

  async function runAttention(panelSeries = null) {
    if (!state.input) return;
    clearErrors(["channel", "attention"]);
    let body;
    if (state.version.panel) {
      // A global model: the series as the forecast sent it (covariates too); no matrices, one channel.
      const sent = panelSeries || (state.forecast && state.forecast.request.series[0]);
      if (!sent) return;
      body = { series: sent };
    } else {
      const series = { values: state.input.values };
      const start = $("start").value.trim();
      if (start) series.start = start;
      body = { series, channel: Number($("channel").value), matrices: MATRICES };
    }
    try {
      await runTimed("attention", body, "recurrence-view", renderAttention);
    } catch (error) {
      // The forecast, sent the same series and covariates, already names their problems (and the two
      // answers land in either order): say only what the attention adds.
      if (!(error instanceof ApiError) || !["data", "start", "covariates"].includes(slotFor(error))) {
        showApiError(error);
      }
    }
  }

  // After the browser has painted what was drawn: one frame, then a task.
  function nextPaint() {
    return new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  }

  // Performance API measures: the server's part (request to response headers) and the page's
  // (the body read and parsed, drawn and painted), in ms; the tests read them.
  function measure(what) {
    const names = { server: [`${what}-request`, `${what}-response`], page: [`${what}-response`, `${what}-rendered`] };
    if (what === "attention") {
      names.parse = ["attention-response", "attention-parsed"];
      names.draw = ["attention-parsed", "attention-rendered"];
    }
    const out = {};
    for (const [part, [from, to]] of Object.entries(names)) {
      out[part] = performance.measure(`${what}: ${part}`, from, to).duration;
    }
    return out;
  }

  // ---------------------------------------------------------------------------------------------
  // The forecast: one uPlot per channel, input window then forecast, bands for each level.
  const FORECAST = "#c2410c";
  const INPUT = "#334e68";

  function bandKeys(answer) {
    const levels = Object.keys(answer)
      .filter((k) => k.startsWith("lo-"))
      .map((k) => Number(k.slice(3)))
      .sort((a, b) => b - a); // widest first, so narrower bands are drawn over it
    return levels;
  }

  function renderForecast(series, answer, version) {
    const fc = answer.forecasts[0];
    const values = windowValues(series.values, version);
    const n = historyLength(series.values, version);
    const W = values[0].length;
    const H = fc.forecast.length;
    const zone = modelZone(version);
    const t0 = parseTime(series.start, zone);
    const step = stepper(version);
    const timed = t0 != null && fc.timestamps != null;
    // x: the window's times (start + i·step for its last W points), then the forecast's own timestamps.
    const x = timed
      ? [...Array.from({ length: W }, (_, i) => step(t0, n - W + i)), ...fc.timestamps.map((t) => parseTime(t, zone))]
      : [...Array.from({ length: W }, (_, i) => i - W + 1), ...Array.from({ length: H }, (_, k) => k + 1)];
    const levels = bandKeys(fc);
    for (const plot of state.plots) plot.destroy();
    state.plots = [];
    const container = $("charts");
    container.replaceChildren();
    const width = chartWidth(container);
    fc.channels.forEach((name, c) => {
      const nulls = (k) => new Array(k).fill(null);
      const data = [x, [...values[c], ...nulls(H)], [...nulls(W), ...fc.forecast.map((row) => row[c])]];
      const seriesOpts = [
        { label: timed ? `time (${zone || "UTC"})` : "step", value: timed ? (u, ts) => formatTime(ts, zone) : (u, v) => (v == null ? "–" : v) },
        { label: "input", stroke: INPUT, width: 1.25, value: formatValue },
        { label: "forecast", stroke: FORECAST, width: 2, value: formatValue },
      ];
      const bands = [];
      levels.forEach((level, i) => {
        const alpha = 0.13 + 0.14 * i;
        data.push([...nulls(W), ...fc[`lo-${level}`].map((row) => row[c])]);
        data.push([...nulls(W), ...fc[`hi-${level}`].map((row) => row[c])]);
        const lo = data.length - 2;
        const hi = data.length - 1;
        const stroke = `rgba(194, 65, 12, ${0.3 + 0.15 * i})`;
        seriesOpts.push({ label: `lo-${level}`, stroke, width: 0.75, value: formatValue });
        seriesOpts.push({ label: `hi-${level}`, stroke, width: 0.75, value: formatValue });
        bands.push({ series: [hi, lo], fill: `rgba(194, 65, 12, ${alpha})` });
      });
      const box = document.createElement("div");
      box.className = "chart";
      box.dataset.channel = name;
      container.append(box);
      const target = version.dataset && version.dataset.target === name ? " (target)" : "";
      const plot = new uPlot(
        {
          title: `${name}${target}`,
          width,
          height: 230,
          tzDate: (ts) => uPlot.tzDate(new Date(ts * 1000), zone || "Etc/UTC"),
          scales: { x: { time: timed } },
          series: seriesOpts,
          bands,
          axes: [{ size: 44, values: timed ? (u, splits) => timeTicks(splits, zone) : undefined }, { size: 56, values: (u, splits) => splits.map(formatTick) }],
          cursor: { sync: { key: "forecast" }, drag: { x: true, y: false }, bind: { mousedown: panOnShift } },
          legend: { live: true },
          hooks: { setScale: [syncZoom] },
          plugins: [wheelZoom()],
        },
        data,
        box,
      );
      state.plots.push(plot);
    });
  }

  function chartWidth(container) {
    const total = container.clientWidth || 1200;
    const columns = Math.max(1, Math.floor((total + 16) / (560 + 16)));
    return Math.floor((total - 16 * (columns - 1)) / columns);
  }

  function formatValue(u, v) {
    return v == null ? "–" : v.toFixed(3);
  }

  function formatTick(v) {
    return Math.abs(v) >= 1000 || (Math.abs(v) < 0.01 && v !== 0) ? v.toExponential(1) : `${+v.toFixed(3)}`;
  }

  const MONTHS = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"];

  // Time ticks in the model's zone (UTC without one): "Jan 27", with the hour when ticks are less than
  // a day apart, and the year on the first tick and where it changes.
  function timeTicks(splits, zone) {
    const spacing = splits.length > 1 ? splits[1] - splits[0] : 86400;
    let year = null;
    return splits.map((ts) => {
      const d = wallDate(ts, zone);
      let text = `${MONTHS[d.getUTCMonth()]} ${d.getUTCDate()}`;
      if (spacing < 86400) text += ` ${String(d.getUTCHours()).padStart(2, "0")}:${String(d.getUTCMinutes()).padStart(2, "0")}`;
      if (d.getUTCFullYear() !== year) {
        year = d.getUTCFullYear();
        text += `\n${year}`;
      }
      return text;
    });
  }

  // A time in the model's zone with its offset there ("2023-10-29 02:15 +01:00"); UTC without a zone.
  function formatTime(ts, zone) {
    if (ts == null) return "–";
    const text = wallDate(ts, zone).toISOString().replace("T", " ").replace(/:00\.000Z$/, "").replace(/\.000Z$/, "");
    return zone ? `${text} ${offsetText(zoneOffset(zone, ts * 1000))}` : text;
  }

  // Zooming one channel's chart zooms them all to the same times.
  let syncing = false;
  function syncZoom(u, key) {
    if (key !== "x" || syncing) return;
    syncing = true;
    const { min, max } = u.scales.x;
    for (const other of state.plots) if (other !== u) other.setScale("x", { min, max });
    syncing = false;
  }

  // Shift+drag pans along time; a plain drag keeps uPlot's zoom-to-selection.
  function panOnShift(u, target, handler) {
    return (event) => {
      if (!event.shiftKey) return handler(event);
      const x0 = event.clientX;
      const { min, max } = u.scales.x;
      const perPixel = (max - min) / u.bbox.width * devicePixelRatio;
      const move = (e) => u.setScale("x", { min: min - (e.clientX - x0) * perPixel, max: max - (e.clientX - x0) * perPixel });
      const up = () => {
        document.removeEventListener("mousemove", move);
        document.removeEventListener("mouseup", up);
      };
      document.addEventListener("mousemove", move);
      document.addEventListener("mouseup", up);
      return null;
    };
  }

  // The wheel zooms time around the pointer.
  function wheelZoom() {
    return {
      hooks: {
        ready: (u) => {
          u.over.addEventListener(
            "wheel",
            (e) => {
              e.preventDefault();
              const { min, max } = u.scales.x;
              const at = u.posToVal(e.offsetX, "x");
              const factor = e.deltaY < 0 ? 0.8 : 1.25;
              u.setScale("x", { min: at - (at - min) * factor, max: at + (max - at) * factor });
            },
            { passive: false },
          );
        },
      },
    };
  }

  // ---------------------------------------------------------------------------------------------
  // The recurrence: per layer, one row per head (label, gate, then each matrix as a heatmap), the
  // heads sorted by their weight; colour scales per matrix and layer.

  // Colour maps as stops (matplotlib's viridis; ColorBrewer's RdBu, reversed: blue < 0 < red).
  const VIRIDIS = ["#440154", "#482878", "#3e4989", "#31688e", "#26828e", "#1f9e89", "#35b779", "#6ece58", "#b5de2b", "#fde725"];
  const RDBU = ["#053061", "#2166ac", "#4393c3", "#92c5de", "#d1e5f0", "#f7f7f7", "#fddbc7", "#f4a582", "#d6604d", "#b2182b", "#67001f"];

  function lut(stops) {
    const rgb = stops.map((s) => [1, 3, 5].map((i) => parseInt(s.slice(i, i + 2), 16)));
    const table = new Uint8ClampedArray(256 * 3);
    for (let i = 0; i < 256; i++) {
      const pos = (i / 255) * (rgb.length - 1);
      const k = Math.min(rgb.length - 2, Math.floor(pos));
      const f = pos - k;
      for (let ch = 0; ch < 3; ch++) table[i * 3 + ch] = rgb[k][ch] * (1 - f) + rgb[k + 1][ch] * f;
    }
    return table;
  }
  const LUTS = { sequential: lut(VIRIDIS), diverging: lut(RDBU) };

  // A percentile of many values, from an even sample of at most 100k of them.
  function percentile(arrays, q, abs) {
    let total = 0;
    for (const a of arrays) total += a.length;
    const stride = Math.max(1, Math.floor(total / 100000));
    const sample = new Float32Array(Math.ceil(total / stride) + arrays.length);
    let n = 0;
    for (const a of arrays) for (let i = 0; i < a.length; i += stride) sample[n++] = abs ? Math.abs(a[i]) : a[i];
    const sorted = sample.subarray(0, n).sort();
    return sorted[Math.min(n - 1, Math.max(0, Math.round(q * (n - 1))))];
  }

  // The scale of one matrix in one layer: non-negative weights (softmax) get a sequential map between
  // their 1st and 99th percentiles; signed ones (REM, mixed) a diverging map, white at 0, symmetric at
  // the 99th percentile of |w|. Values beyond the limits take the end colours.
  function colourScale(arrays) {
    let min = Infinity;
    for (const a of arrays) for (let i = 0; i < a.length; i++) if (a[i] < min) min = a[i];
    if (min >= 0) {
      const lo = percentile(arrays, 0.01, false);
      let hi = percentile(arrays, 0.99, false);
      if (!(hi > lo)) hi = lo + 1e-12;
      return { kind: "sequential", lo, hi, note: "1st–99th percentile" };
    }
    const hi = percentile(arrays, 0.99, true) || 1e-12;
    return { kind: "diverging", lo: -hi, hi, note: "±99th percentile of |w|" };
  }

  function paint(canvas, values, width, height, scale) {
    canvas.width = width;
    canvas.height = height;
    const ctx = canvas.getContext("2d");
    const image = ctx.createImageData(width, height);
    const table = LUTS[scale.kind];
    const span = scale.hi - scale.lo;
    for (let i = 0; i < values.length; i++) {
      const t = Math.min(255, Math.max(0, Math.round(((values[i] - scale.lo) / span) * 255)));
      image.data[i * 4] = table[t * 3];
      image.data[i * 4 + 1] = table[t * 3 + 1];
      image.data[i * 4 + 2] = table[t * 3 + 2];
      image.data[i * 4 + 3] = 255;
    }
    ctx.putImageData(image, 0, 0);
  }

  function flat(matrix) {
    if (matrix == null) return null;
    return Array.isArray(matrix[0]) ? Float32Array.from(matrix.flat()) : Float32Array.from(matrix);
  }

  // A head's weight: the sum of |mixed| over the lags (for L×L matrices, its mean over the queries):
  // how much of the values the head passes on.
  function headWeight(mixed, rows) {
    let sum = 0;
    for (let i = 0; i < mixed.length; i++) sum += Math.abs(mixed[i]);
    return sum / rows;
  }

  // λ for a regular head; γ and θ for a cyclic one, θ as 2π/period when the period is a whole number
  // of steps (θ = 0.2618 is a 24-step cycle); d for a dilated head.
  function describeHead(h) {
    const parts = [];
    if (h.lambda != null) parts.push(`λ=${fmt(h.lambda)}`);
    if (h.gamma != null) parts.push(`γ=${fmt(h.gamma)}`);
    if (h.theta != null) {
      const period = (2 * Math.PI) / Math.abs(h.theta);
      const whole = Math.round(period);
      parts.push(Math.abs(period - whole) < 0.01 && whole > 1 ? `θ=${h.theta < 0 ? "−" : ""}2π/${whole}` : `θ=${fmt(h.theta)}`);
    }
    if ((h.dilation || 1) > 1) parts.push(`d=${h.dilation}`);
    return parts.join(" ");
  }

  function fmt(v) {
    return Number(v).toPrecision(3).replace(/\.?0+$/, "").replace(/\.?0+e/, "e");
  }

  // Lag ticks: whole cycles when the model has one (1, 2, 4, 7, 14 or 28 of them), else 1-2-5 steps;
  // at most 8 ticks.
  function niceStep(L, period) {
    if (period && L / period >= 2) {
      const cycles = [1, 2, 4, 7, 14, 28].find((k) => L / (k * period) <= 8);
      if (cycles) return cycles * period;
    }
    const target = L / 8;
    const base = 10 ** Math.floor(Math.log10(target));
    return [1, 2, 5, 10].map((m) => m * base).find((s) => s >= target);
  }

  function renderAttention(answer, version) {
    const container = $("layers");
    container.replaceChildren();
    const global = Boolean(answer.readout || answer.sensitivity);
    $("sort").closest("label").hidden = global; // a global model has no heads to sort
    if (global) {
      renderGlobal(answer, container);
      return;
    }
    // The matrices' side: L, or a global transformer's L + H tokens (its horizon tokens).
    const first = answer.layers.flatMap((l) => l.heads).find((h) => h.matrices && h.matrices.mixed);
    const L = first && Array.isArray(first.matrices.mixed[0]) ? first.matrices.mixed.length : answer.input_length;
    const rows = answer.query === "last";
    const period = version.cycle ? version.cycle.period : null;
    for (const layer of answer.layers) {
      const present = MATRICES.filter((m) => layer.heads.some((h) => h.matrices && h.matrices[m] != null));
      const heads = layer.heads.map((h) => {
        const data = {};
        for (const m of present) data[m] = flat(h.matrices[m]);
        const weight = data.mixed ? headWeight(data.mixed, rows ? 1 : L) : h.head;
        return { ...h, data, weight };
      });
      const scales = {};
      for (const m of present) scales[m] = colourScale(heads.map((h) => h.data[m]));
      const section = document.createElement("section");
      section.className = "layer";
      section.dataset.layer = layer.layer;
      const title = document.createElement("h3");
      title.textContent = `layer ${layer.layer}: ${heads.length} heads, ${rows ? "the last step's row over the L keys" : "L × L (rows: query i, columns: key j)"}, channel ${answer.channel.name}`;
      section.append(title, scaleLegend(present, scales, layer));
      const grid = document.createElement("div");
      grid.className = "heads";
      grid.style.setProperty("--columns", present.length);
      const header = document.createElement("div");
      header.className = "heads-header";
      const labels = document.createElement("div");
      labels.className = "head-label";
      labels.append(textCell("head", "number"), textCell("kind", "head-kind"), textCell("parameters", "params"), textCell("Σ|mixed|", "weight"));
      header.append(labels, textCell("gate g"), ...present.map((m) => textCell(MATRIX_TITLES[m])));
      grid.append(header);
      for (const h of sortHeads(heads)) grid.append(headRow(h, present, scales, L, rows, version, answer));
      grid.append(lagAxis(present.length, L, rows, period, version));
      section.append(grid);
      container.append(section);
    }
  }

  // A global model's answer: a heatmap of each lag's weight per horizon step (rows: steps 1..H; columns:
  // the lags, oldest left, as the heads' rows), a bar per term of the read-out (REM kernel, direct lags,
  // missing share, bias, covariate) by its share of the forecast, and a hybrid's members and weights.
  function renderGlobal(answer, container) {
    const part = answer.readout || answer.sensitivity;
    const L = part.lag_weights.length;
    const H = L ? part.lag_weights[0].length : 0;
    const values = new Float32Array(L * H);
    for (let j = 0; j < L; j++) for (let h = 0; h < H; h++) values[h * L + j] = part.lag_weights[j][h];
    const section = document.createElement("section");
    section.className = "layer global";
    section.id = "global-view";
    const title = document.createElement("h3");
    title.textContent = answer.readout
      ? `lag weights: each of the ${L} lags' weight per horizon step (REM kernels and direct lags combined by the read-out's weights; normalised units, value / ${fmt(part.scale)})`
      : `lag effects: d forecast / d value of each of the ${L} lags per horizon step (finite differences through the served network; it has no inspection graph)`;
    const hi = Math.max(1e-12, ...Array.from(values, Math.abs));
    const scale = { kind: "diverging", lo: -hi, hi, note: `±${fmt(hi)}` };
    const canvas = document.createElement("canvas");
    canvas.id = "lag-weights";
    canvas.className = "lag-weights";
    canvas.style.setProperty("--steps", H);
    paint(canvas, values, L, H, scale);
    const axis = document.createElement("p");
    axis.className = "hint";
    axis.textContent = `rows: horizon steps 1 (top) to ${H}; columns: lags ${L - 1} (left) to 0, the last value (right); blue negative, red positive, ${scale.note}`;
    section.append(title, canvas, axis);
    if (answer.readout) {
      const r = answer.readout;
      const terms = [
        ...r.kernels.map((k) => [`${k.index} ${k.kind || "?"}${(k.dilation || 1) > 1 ? `/${k.dilation}` : ""} ${kernelParams(k)}`, k.share, "kernel"]),
        [`last ${r.direct_lags.lags} lags`, r.direct_lags.share, "lags"],
        ["missing share", r.missing.share, "missing"],
        ["bias", r.bias.share, "bias"],
        ...(r.lift ? [[`random layer (${r.lift.width})`, r.lift.share, "lift"]] : []),
        ...r.covariates.map((c) => [`${c.name} (${c.kind})`, c.share, "covariate"]),
        ...(r.still ? [["still window: its last cycle", r.still.share, "bias"]] : []),
      ];
      const heading = document.createElement("h3");
      heading.textContent = "what the forecast is made of: each term's share, Σ over the steps of |weight × feature|";
      const list = document.createElement("div");
      list.id = "kernel-shares";
      list.className = "shares";
      for (const [label, share, kind] of terms) {
        const row = document.createElement("div");
        row.className = `share-row ${kind}`;
        const bar = document.createElement("span");
        bar.className = "share-bar";
        bar.style.setProperty("--share", `${(100 * share).toFixed(2)}%`);
        row.append(textCell(label, "share-label"), bar, textCell(`${(100 * share).toFixed(1)}%`, "share-value"));
        list.append(row);
      }
      section.append(heading, list);
    }
    if (answer.hybrid) {
      const hy = answer.hybrid;
      const heading = document.createElement("h3");
      heading.textContent = hy.local_used
        ? `hybrid: the forecast is Σ weight × member forecast (the local models decompose this series by ${hy.season} steps)`
        : `hybrid: ${hy.observed} observed values, fewer than the local models' ${hy.min_values}: the read-out alone`;
      const table = document.createElement("table");
      table.id = "hybrid-members";
      const head = document.createElement("tr");
      for (const t of ["member", "weight", ...Array.from({ length: hy.forecast.length }, (_, i) => `h${i + 1}`)]) {
        const th = document.createElement("th");
        th.textContent = t;
        head.append(th);
      }
      table.append(head);
      for (const m of [...hy.members, { name: "forecast", weight: 1, forecast: hy.forecast }]) {
        const tr = document.createElement("tr");
        for (const t of [m.name, fmt(m.weight), ...m.forecast.map(fmt)]) {
          const td = document.createElement("td");
          td.textContent = t;
          tr.append(td);
        }
        table.append(tr);
      }
      section.append(heading, table);
    }
    container.append(section);
  }

  function kernelParams(k) {
    const parts = [];
    if (k.lambda != null) parts.push(`λ=${fmt(k.lambda)}`);
    if (k.gamma != null) parts.push(`γ=${fmt(k.gamma)}`);
    if (k.theta != null) parts.push(`θ=${fmt(k.theta)}`);
    return parts.join(" ");
  }

  function sortHeads(heads) {
    const by = $("sort").value;
    const sorted = [...heads];
    if (by === "weight") sorted.sort((a, b) => b.weight - a.weight || a.head - b.head);
    else if (by === "kind") sorted.sort((a, b) => String(a.kind).localeCompare(String(b.kind)) || b.weight - a.weight);
    else sorted.sort((a, b) => a.head - b.head);
    return sorted;
  }

  function textCell(text, cls) {
    const div = document.createElement("div");
    div.textContent = text;
    if (cls) div.className = cls;
    return div;
  }

  // A gate's bar: a track filled to `fraction` (0 to 1) of its width.
  function gateTrack(fraction) {
    const track = document.createElement("div");
    track.className = "track";
    const bar = document.createElement("div");
    bar.className = "bar";
    bar.style.width = `${Math.max(0, Math.min(1, fraction)) * 100}%`;
    track.append(bar);
    return track;
  }

  function headRow(h, present, scales, L, rows, version, answer) {
    const row = document.createElement("div");
    row.className = rows ? "head-row" : "head-row square";
    row.dataset.head = h.head;
    const label = document.createElement("div");
    label.className = "head-label";
    label.append(
      textCell(`#${h.head}`, "number"),
      textCell(h.kind || "?", "head-kind"),
      textCell(describeHead(h), "params"),
      textCell(h.data.mixed ? fmt(h.weight) : "", "weight"),
    );
    const gate = document.createElement("div");
    gate.className = "gate";
    gate.append(gateTrack(h.gate ?? 0), h.gate == null ? "–" : Number(h.gate).toFixed(2));
    row.append(label, gate);
    for (const m of present) {
      const canvas = document.createElement("canvas");
      canvas.dataset.matrix = m;
      paint(canvas, h.data[m], L, rows ? 1 : L, scales[m]);
      canvas.addEventListener("mousemove", (e) => {
        const rect = canvas.getBoundingClientRect();
        const j = Math.min(L - 1, Math.floor(((e.clientX - rect.left) / rect.width) * L));
        const i = rows ? 0 : Math.min(L - 1, Math.floor(((e.clientY - rect.top) / rect.height) * L));
        const value = h.data[m][rows ? j : i * L + j];
        const where = rows ? `lag ${L - 1 - j}` : `query ${i}, key ${j}`;
        $("readout").textContent = `head ${h.head} (${h.kind}) · ${where} · ${m} = ${value.toPrecision(4)}`;
      });
      row.append(canvas);
    }
    return row;
  }

  function scaleLegend(present, scales, layer) {
    const box = document.createElement("div");
    box.className = "scales";
    for (const m of present) {
      const s = scales[m];
      const item = document.createElement("div");
      item.className = "scale";
      item.dataset.matrix = m;
      const canvas = document.createElement("canvas");
      const ramp = new Float32Array(256).map((_, i) => s.lo + ((s.hi - s.lo) * i) / 255);
      paint(canvas, ramp, 256, 1, s);
      const ends = document.createElement("div");
      ends.className = "ends";
      ends.append(textCell(fmt(s.lo)), textCell(s.kind === "diverging" ? "0" : ""), textCell(fmt(s.hi)));
      item.append(textCell(`${m}: ${s.kind === "sequential" ? "sequential" : "diverging"}, limits at the ${s.note}`), canvas, ends);
      box.append(item);
    }
    const gate = document.createElement("div");
    gate.className = "gate-legend";
    const track = document.createElement("div");
    track.className = "gate";
    track.append(gateTrack(1));
    gate.append(track, `gate g per head (bar from 0 to 1${layer.gate_mode ? `, one per ${layer.gate_mode}` : ""}): mixed = (1 − g)·softmax + g·REM`);
    box.append(gate);
    return box;
  }

  function lagAxis(columns, L, rows, period, version) {
    const axis = document.createElement("div");
    axis.className = "heads-axis";
    axis.append(textCell(""), textCell(""));
    const step = niceStep(L, period);
    for (let c = 0; c < columns; c++) {
      const cellBox = document.createElement("div");
      const ticks = document.createElement("div");
      ticks.className = "axis";
      for (let lag = 0; lag < L; lag += step) {
        // Key j sits at lag L-1-j; column j's centre is at (j + 0.5) / L of the width.
        const j = rows ? L - 1 - lag : lag;
        const tick = document.createElement("span");
        tick.textContent = `${lag}`;
        const at = (j + 0.5) / L;
        tick.style.left = `${at * 100}%`;
        if (at > 0.97) tick.style.transform = "translateX(-100%)"; // the newest lag, flush right
        if (at < 0.03) tick.style.transform = "none";
        ticks.append(tick);
      }
      const unit = version.frequency ? ` (one step = ${version.frequency})` : "";
      cellBox.append(ticks, textCell(rows ? `lag before the last input${unit}` : "key j", "axis-title"));
      axis.append(cellBox);
    }
    return axis;
  }

  // What evaluation.js (the backtest and anomalies views) reuses of this page.
  window.__rsaUi = {
    api, readInput, useText, withCovariates, stepper, parseTime, showApiError, showError, clearErrors, versionPath,
    chartWidth, formatValue, formatTick, timeTicks, formatTime, panOnShift, wheelZoom,
    zone: () => modelZone(state.version),
  };

  // ---------------------------------------------------------------------------------------------
  function start() {
    $("key-form").addEventListener("submit", (e) => {
      e.preventDefault();
      state.key = $("api-key").value.trim();
      loadModels();
    });
    $("api-key").addEventListener("change", () => {
      state.key = $("api-key").value.trim();
      loadModels();
    });
    $("model").addEventListener("change", chooseModel);
    $("version").addEventListener("change", chooseVersion);
    $("inputs").addEventListener("submit", submit);
    $("load-example").addEventListener("click", () => loadExample().catch(showApiError));
    $("file").addEventListener("change", (e) => e.target.files[0] && readFile(e.target.files[0]));
    const area = $("data");
    area.addEventListener("dragover", (e) => {
      e.preventDefault();
      area.classList.add("dropping");
    });
    area.addEventListener("dragleave", () => area.classList.remove("dropping"));
    area.addEventListener("drop", (e) => {
      e.preventDefault();
      area.classList.remove("dropping");
      const file = e.dataTransfer.files[0];
      if (file) readFile(file);
    });
    $("channel").addEventListener("change", () => state.input && runAttention());
    $("sort").addEventListener("change", () => state.attention && renderAttention(state.attention.response, state.version));
    loadModels();
  }

  start();
})();
