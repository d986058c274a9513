// The Calculator's GGUF file input (kvsite/sections/calc/gguf_browser.py): the reader's browser reads the file's header with
// File.slice, only as far as the tensor table ends, and sends those bytes (gzip, base64) as the trigger value
// "header"; the tensor data is never read. The walk follows kvcore/inputs/gguf_header.py (ggml's gguf.cpp):
// magic, version, tensor count, key-value count, each key-value (arrays stepped over by their element size),
// each tensor info. Where the file breaks a rule the Python reader checks, the walk stops just after the field
// that breaks it and sends the bytes up to there, so the server's reader says what is wrong in the page's
// language; a header past `limit` bytes is not sent at all.
const SCALAR = { 0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8 };
const STRING = 8;
const ARRAY = 9;

class Stop {
  constructor(why) {
    this.why = why; // "invalid": a rule broken (bytes to here are sent); "eof"; "limit"
  }
}

async function readHeader(file, d) {
  const cap = Math.min(file.size, d.limit);
  let buf = new Uint8Array(Math.min(cap, 1 << 20));
  let view = new DataView(buf.buffer);
  let loaded = 0;
  let pos = 0;
  async function need(n) {
    if (pos + n <= loaded) return;
    if (pos + n > file.size) throw new Stop("eof");
    if (pos + n > d.limit) throw new Stop("limit");
    const end = Math.min(cap, Math.max(pos + n, loaded + (1 << 20), loaded * 2));
    if (end > buf.length) {
      const grown = new Uint8Array(end);
      grown.set(buf.subarray(0, loaded));
      buf = grown;
      view = new DataView(buf.buffer);
    }
    buf.set(new Uint8Array(await file.slice(loaded, end).arrayBuffer()), loaded);
    loaded = end;
  }
  async function u32() {
    if (pos + 4 > loaded) await need(4);
    const v = view.getUint32(pos, true);
    pos += 4;
    return v;
  }
  async function u64() {
    if (pos + 8 > loaded) await need(8);
    const v = view.getBigUint64(pos, true);
    pos += 8;
    return v > BigInt(Number.MAX_SAFE_INTEGER) ? Number.MAX_SAFE_INTEGER : Number(v);
  }
  async function skip(n) {
    if (pos + n > loaded) await need(n);
    pos += n;
  }
  async function string(limit) {
    const n = await u64();
    if (n > limit || n > file.size - pos) throw new Stop("invalid");
    await skip(n);
  }
  async function value(type, depth) {
    if (type in SCALAR) return skip(SCALAR[type]);
    if (type === STRING) return string(d.maxString);
    if (type !== ARRAY || depth >= d.maxNesting) throw new Stop("invalid");
    const item = await u32();
    const count = await u64();
    const smallest = item in SCALAR ? SCALAR[item] : item === STRING || item === ARRAY ? 8 : 0;
    if (!smallest || count * smallest > file.size - pos) throw new Stop("invalid");
    if (item in SCALAR) return skip(count * smallest);
    for (let i = 0; i < count; i++) await value(item, depth + 1);
  }
  try {
    await need(Math.min(file.size, 4));
    if (file.size < 4 || String.fromCharCode(...buf.subarray(0, 4)) !== "GGUF") {
      pos = Math.min(file.size, 4);
      throw new Stop("invalid");
    }
    pos = 4;
    const version = await u32();
    if (version !== 2 && version !== 3) throw new Stop("invalid");
    const nTensors = await u64();
    const nKv = await u64();
    const left = file.size - pos;
    if (nKv > d.maxKv || nKv * 13 > left || nTensors > d.maxTensors || nTensors * 25 > left) {
      throw new Stop("invalid");
    }
    for (let i = 0; i < nKv; i++) {
      await string(d.maxName);
      await value(await u32(), 0);
    }
    for (let i = 0; i < nTensors; i++) {
      await string(d.maxName);
      const dims = await u32();
      if (dims < 1 || dims > d.maxDims) throw new Stop("invalid");
      await skip(8 * dims + 4 + 8);
    }
  } catch (e) {
    if (!(e instanceof Stop)) throw e;
    if (e.why === "limit") return { stop: "limit" };
  }
  return { stop: "sent", bytes: buf.subarray(0, Math.min(pos, loaded)) };
}

async function gzipBase64(bytes) {
  let blob = new Blob([bytes]);
  let encoding = "raw";
  if (typeof CompressionStream !== "undefined") {
    blob = await new Response(blob.stream().pipeThrough(new CompressionStream("gzip"))).blob();
    encoding = "gzip";
  }
  const url = await new Promise((resolve, reject) => {
    const r = new FileReader();
    r.onload = () => resolve(r.result);
    r.onerror = () => reject(r.error);
    r.readAsDataURL(blob);
  });
  return { encoding, data: url.slice(url.indexOf(",") + 1) };
}

export default function (component) {
  const { data, parentElement, setTriggerValue } = component;
  const input = parentElement.querySelector("input");
  const label = parentElement.querySelector(".kv-label");
  const status = parentElement.querySelector(".kv-status");
  label.textContent = data.label;
  parentElement.querySelector(".kv-choose").textContent = data.choose;
  input.setAttribute("aria-label", data.label);
  async function take(file) {
    if (!file) return;
    status.textContent = data.reading;
    const sent = { name: file.name, size: file.size };
    try {
      const got = await readHeader(file, data);
      if (got.stop === "limit") {
        sent.error = "limit";
      } else {
        Object.assign(sent, { length: got.bytes.length }, await gzipBase64(got.bytes));
      }
    } catch (e) {
      sent.error = "unreadable";
    }
    status.textContent = "";
    input.value = ""; // the same file chosen again is read again
    setTriggerValue("header", sent);
  }
  input.onchange = () => take(input.files && input.files[0]);
  const pick = parentElement.querySelector(".kv-pick"); // a file dropped on the picker is read the same way
  pick.ondragover = (e) => e.preventDefault();
  pick.ondrop = (e) => {
    e.preventDefault();
    take(e.dataTransfer && e.dataTransfer.files[0]);
  };
}
