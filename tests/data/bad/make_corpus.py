"""Rewrites the committed bad-input corpus folders from this script (cases.yaml describes them)."""
from pathlib import Path
import shutil
BAD = Path(__file__).resolve().parent
for child in BAD.iterdir():
    if child.is_dir() and child.name != "_base":
        shutil.rmtree(child)
REPO = "project/Repo/resource.repository"
TEX = "project/Repo/Props/22222222-2222-4222-8222-222222222222/texture.xml"
MESH = "project/Repo/Props/11111111-1111-4111-8111-111111111111/resource.xml"
WORLD = "project/Worlds/Main.iworld"
LEVEL = "project/Levels/Main.ilevel"
base_build = (BAD / "_base/build.yaml").read_text()
base_repo = (BAD / "_base" / REPO).read_text()

def case(name, files):
    for rel, data in files.items():
        p = BAD / name / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(data if isinstance(data, bytes) else data.encode("utf-8"))

def build(extra_replace=None, append=""):
    text = base_build
    for old, new in (extra_replace or {}).items():
        assert old in text, old
        text = text.replace(old, new)
    return text + append

# ---- build files
case("build-not-yaml", {"build.yaml": "project: project\ncook:\n  maps: [Worlds/Main.iworld\n"})
case("build-top-level-list", {"build.yaml": "- project: project\n- output: out\n"})
case("build-unknown-key", {"build.yaml": build({"  always_cook: [UI/]\n": "  always_cok: [UI/]\n"})})
case("build-unknown-section", {"build.yaml": build(append="bundels:\n  layout: []\n")})
case("build-wrong-type", {"build.yaml": build(append="archive:\n  level: high\n")})
case("build-bad-enum", {"build.yaml": build(append="archive:\n  compression: brotli\n")})
case("build-missing-project", {"build.yaml": build({"project: project\n": ""})})
case("build-project-not-found", {"build.yaml": build({"project: project\n": "project: no/such/folder\n"})})
case("build-rule-file-missing", {"build.yaml": build({"files: [rules.yaml]": "files: [rules.yaml, missing-rules.yaml]"})})
case("build-empty", {"build.yaml": ""})
case("build-latin1", {"build.yaml": build().encode("utf-8") + "# caf\u00e9\n".encode("latin-1")})
case("build-workers-zero", {"build.yaml": build({"  kind: local\n": "  kind: local\n  workers: 0\n"})})
case("build-misspelt-project", {"build.yaml": build({"project: project\n": "projekt: project\n"})})
case("build-misspelt-cooker-command", {"build.yaml": build({"  always_cook: [UI/]\n": "  always_cook: [UI/]\n  cookers:\n    Texture: {comand: texconv}\n"})})
case("build-unknown-cooker", {"build.yaml": build({"  always_cook: [UI/]\n": "  always_cook: [UI/]\n  cookers:\n    Texture: magic\n"})})
case("build-layout-not-list", {"build.yaml": build({"  layout:\n    - name: \"maps/{stem}\"\n      maps: all\n    - name: \"ui/{package}\"\n      include: [\"UI/**\"]\n": "  layout: ui\n"})})
case("build-output-holds-project", {"build.yaml": build({"output: build/out\n": "output: .\n"})})
case("build-yaml-alias-bomb", {"build.yaml": build(append=(
    "x0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n"
    "x1: &a1 [*a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0, *a0]\n"
    "x2: &a2 [*a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1, *a1]\n"
    "x3: &a3 [*a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2, *a2]\n"
    "x4: &a4 [*a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3, *a3]\n"
    "x5: &a5 [*a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4, *a4]\n"
    "x6: &a6 [*a5, *a5, *a5, *a5, *a5, *a5, *a5, *a5, *a5]\n"))})
case("build-duplicate-layout-claim", {"build.yaml": build(append="") .replace(
    '      include: ["UI/**"]\n', '      include: ["UI/**"]\n    - name: buttons\n      include: ["UI/**"]\n')})
# ---- unsafe bundle names and output paths
for name, bundle in [("bundle-name-dotdot", "../../escaped"), ("bundle-name-absolute", "/tmp/orchestrate-escaped"),
                     ("bundle-name-backslash", "..\\\\escaped"), ("bundle-name-drive", "C:/escaped")]:
    case(name, {"build.yaml": build({'name: "ui/{package}"': f'name: "{bundle}"'})})
case("bundle-package-traversal", {REPO: base_repo.replace("<Package>UI</Package>", "<Package>UI/../../../escaped</Package>")})
# ---- rule files
case("rules-not-yaml", {"rules.yaml": "- id: broken\n  rpath: [unclosed\n"})
case("rules-scalar", {"rules.yaml": "just a sentence, not rules\n"})
case("rules-unknown-field", {"rules.yaml": "- id: typo\n  rpath: 'resource'\n  xpaht: '*,Name'\n  condition: ['exists']\n"})
case("rules-missing-condition", {"rules.yaml": "- id: no-condition\n  rpath: 'resource'\n  xpath: '*,Name'\n"})
case("rules-bad-regex", {"rules.yaml": "- id: bad-regex\n  rpath: '[unterminated'\n  xpath: '*,Name'\n  condition: ['exists']\n"})
case("rules-bad-xpath", {"rules.yaml": "- id: bad-xpath\n  rpath: 'resource'\n  xpath: '*/It*ems/,'\n  condition: ['exists']\n"})
case("rules-unknown-severity", {"rules.yaml": "- id: bad-severity\n  severity: catastrophic\n  rpath: 'resource'\n  xpath: '*,Name'\n  condition: ['exists']\n"})
case("rules-unknown-method", {"rules.yaml": "- id: bad-method\n  rpath: 'resource'\n  xpath: '*,Name'\n  condition: ['looks_fine']\n"})
case("rules-bad-literal-set", {"rules.yaml": "- id: bare-words\n  rpath: 'resource'\n  xpath: '*,Name'\n  condition: ['in', '[Material, Mesh]']\n"})
case("rules-func-syntax-error", {"rules.yaml": "- id: func-syntax\n  rpath: 'resource'\n  xpath: '*,Name'\n  condition: ['func_check']\n  func_str: |\n    def check(**kw)\n        return []\n"})
case("rules-func-raises-at-load", {"rules.yaml": "- id: func-raises-at-load\n  rpath: 'resource'\n  xpath: '*,Name'\n  condition: ['func_check']\n  func_str: |\n    raise RuntimeError('exploded while loading')\n    def check(**kw):\n        return []\n"})
case("rules-func-loops-at-load", {"rules.yaml": "- id: func-loops-at-load\n  rpath: 'resource'\n  xpath: '*,Name'\n  condition: ['func_check']\n  func_str: |\n    while True:\n        pass\n    def check(**kw):\n        return []\n"})
case("rules-func-loops", {"rules.yaml": "- id: func-loops\n  rpath: 'texture\\.xml$'\n  xpath: 'Texture,Width'\n  condition: ['func_check']\n  func_str: |\n    def check(**kw):\n        while True:\n            pass\n"})
case("rules-func-stuck-in-c", {"rules.yaml": "- id: func-stuck\n  rpath: 'texture\\.xml$'\n  xpath: 'Texture,Width'\n  condition: ['func_check']\n  func_str: |\n    def check(**kw):\n        return [sum(range(10 ** 13))]\n"})
case("rules-func-exits", {"rules.yaml": "- id: func-exits\n  rpath: 'texture\\.xml$'\n  xpath: 'Texture,Width'\n  condition: ['func_check']\n  func_str: |\n    import sys\n    def check(**kw):\n        sys.exit(0)\n"})
case("rules-func-exits-at-load", {"rules.yaml": "- id: func-exits-at-load\n  rpath: 'texture\\.xml$'\n  xpath: 'Texture,Width'\n  condition: ['exists']\n  func_str: |\n    import sys\n    sys.exit(0)\n"})
case("rules-expression-escape", {"rules.yaml": "- id: escape\n  rpath: 'texture\\.xml$'\n  xpath: 'Texture,Width'\n  condition: ['expr', \"re.__builtins__['__import__']('os').system('touch /tmp/orchestrate-escaped')\"]\n"})
case("rules-func-raises", {"rules.yaml": "- id: func-raises\n  rpath: 'texture\\.xml$'\n  xpath: 'Texture,Width'\n  condition: ['func_check']\n  func_str: |\n    def check(**kw):\n        raise ValueError('custom check exploded')\n"})
case("rules-filter-returns-junk", {"rules.yaml": "- id: filter-junk\n  rpath: 'texture\\.xml$'\n  xpath: 'Texture,Width'\n  filter: artfunc_junk\n  condition: ['exists']\n  func_str: |\n    def junk(**kw):\n        return 42\n"})
case("rules-expression-syntax", {"rules.yaml": "- id: bad-expression\n  rpath: 'texture\\.xml$'\n  xpath: 'Texture,Width'\n  condition: ['expr', 'd >']\n"})
case("rules-latin1", {"rules.yaml": "- id: latin\n  name: \"caf\u00e9\"\n  rpath: 'resource'\n  xpath: '*,Name'\n  condition: ['exists']\n".encode("latin-1")})
bomb_levels = "".join(
    f"&a{n} [{', '.join(['*a%d' % (n - 1)] * 9 if n else ['lol'] * 9)}], " for n in range(7)
)
case("rules-yaml-alias-bomb", {"rules.yaml": (
    "- id: bomb\n  rpath: 'resource'\n  xpath: '*,Name'\n"
    f"  condition: ['in', [{bomb_levels.rstrip(', ')}]]\n"
)})
# 110 aliases of one 10,000-character string: 110 nodes, 1.1 MB of text to whatever walks them
case("rules-yaml-string-aliases", {"rules.yaml": (
    "- id: long\n  rpath: 'resource'\n  xpath: '*,Name'\n"
    f"  name: &long {'lol' * 3334}\n  condition: ['in', [{', '.join(['*long'] * 110)}]]\n"
)})
case("rules-yaml-recursive-alias", {"rules.yaml": (
    "- &loop\n  id: loop\n  rpath: 'resource'\n  xpath: '*,Name'\n  condition: ['in', *loop]\n"
)})
# ---- project content the build cannot do without
case("repo-broken-xml", {REPO: base_repo.replace("</Items>", "</Itemz>")})
case("validate-repo-broken-xml", {REPO: base_repo.replace("</Items>", "</Itemz>")})
case("repo-wrong-encoding", {REPO: base_repo.replace("Crate_tex", "Crat\u00e9_tex").encode("latin-1")})
case("repo-empty", {REPO: b""})
case("repo-binary-garbage", {REPO: bytes(range(256)) * 4})
case("repo-billion-laughs", {REPO: (
    '<?xml version="1.0"?>\n<!DOCTYPE lolz [\n <!ENTITY lol "lol">\n'
    + "".join(f' <!ENTITY lol{i} "{("&lol%s;" % (i - 1 if i > 1 else "")) * 10}">\n' for i in range(1, 10))
    + ']>\n' + base_repo.split("\n", 1)[1].replace("<Name>Crate</Name>", "<Name>&lol9;</Name>"))})
case("repo-external-entity", {REPO: (
    '<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY secret SYSTEM "file:///etc/passwd">]>\n'
    + base_repo.split("\n", 1)[1].replace("<Name>Crate</Name>", "<Name>&secret;</Name>"))})
case("repo-external-dtd-network", {REPO: (
    '<?xml version="1.0"?>\n<!DOCTYPE r SYSTEM "http://127.0.0.1:9/evil.dtd">\n'
    + base_repo.split("\n", 1)[1])})
case("repo-parameter-entity", {REPO: (
    '<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY % ext SYSTEM "http://127.0.0.1:9/x.dtd"> %ext;]>\n'
    + base_repo.split("\n", 1)[1])})
# ---- tolerated oddities (the build goes on; reports say what was wrong)
case("repo-bom", {REPO: b"\xef\xbb\xbf" + base_repo.encode("utf-8")})
case("repo-utf16", {REPO: base_repo.replace('encoding="utf-8"', 'encoding="utf-16"').encode("utf-16")})
case("repo-item-without-guid", {REPO: base_repo.replace("<GUID>33333333-3333-4333-8333-333333333333</GUID>", "")})
case("repo-duplicate-guid", {REPO: base_repo.replace("</Items>", "    <Item>\n      <Type>Mesh</Type>\n      <GUID>11111111-1111-4111-8111-111111111111</GUID>\n      <Package>Props</Package>\n      <Name>Crate_copy</Name>\n    </Item>\n  </Items>")})
case("repo-dangling-reference", {REPO: base_repo.replace("<Deps>22222222-2222-4222-8222-222222222222</Deps>\n    </Item>\n    <Item>\n      <Type>Texture", "<Deps>deadbeef-0000-4000-8000-000000000000</Deps>\n    </Item>\n    <Item>\n      <Type>Texture")})
case("repo-dangling-reference-fatal", {
    REPO: (BAD / "repo-dangling-reference" / REPO).read_text(),
    "build.yaml": build({"  always_cook: [UI/]\n": "  always_cook: [UI/]\n  fail_on_missing: true\n"})})
case("repo-cyclic-deps", {REPO: base_repo.replace("      <Name>Crate_tex</Name>\n", "      <Name>Crate_tex</Name>\n      <Deps>11111111-1111-4111-8111-111111111111</Deps>\n")})
case("level-broken-xml", {LEVEL: "<Level><Entities><Entity>\n"})
case("world-broken-xml", {WORLD: "<World><Levels><Level><Path>Levels/Main.ilevel</Path>\n"})
case("world-missing-level", {WORLD: "<World><Levels><Level><Path>Levels/Nowhere.ilevel</Path></Level></Levels></World>\n"})
case("world-level-path-traversal", {WORLD: "<World><Levels><Level><Path>../../../../../../etc/passwd</Path></Level><Level><Path>Levels/Main.ilevel</Path></Level></Levels></World>\n"})
case("world-level-absolute-path", {WORLD: "<World><Levels><Level><Path>/etc/passwd</Path></Level><Level><Path>Levels/Main.ilevel</Path></Level></Levels></World>\n"})
case("attribute-broken-xml", {MESH: "<Resource><Name>Crate</Name>\n"})
case("attribute-wrong-encoding", {TEX: '<?xml version="1.0" encoding="utf-8"?>\n<Texture><Width>256</Width><Note>\u00e9t\u00e9</Note></Texture>\n'.encode("latin-1")})
case("attribute-empty", {MESH: b""})
case("attribute-not-xml", {MESH: b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"})
case("attribute-entity-expansion", {MESH: '<?xml version="1.0"?>\n<!DOCTYPE r [<!ENTITY secret SYSTEM "file:///etc/passwd">]>\n<Resource><Name>&secret;</Name></Resource>\n'})
# ---- external cookers
case("cooker-timeout", {"build.yaml": build({"  always_cook: [UI/]\n": "  always_cook: [UI/]\n  cookers:\n    Texture: {command: 'sleep 30', timeout: 0.5}\n"})})
case("cooker-fails", {"build.yaml": build({"  always_cook: [UI/]\n": "  always_cook: [UI/]\n  cookers:\n    Texture: {command: 'sh -c \"echo texture compressor crashed >&2; exit 3\"'}\n"})})
case("cooker-not-found", {"build.yaml": build({"  always_cook: [UI/]\n": "  always_cook: [UI/]\n  cookers:\n    Texture: {command: 'no-such-texture-tool {input} {output}'}\n"})})
# ---- the cluster
case("executor-unreachable", {"build.yaml": build({"  kind: local\n": "  kind: ray\n  address: 127.0.0.1:1\n"})})
print("written", sum(1 for c in BAD.iterdir() if c.is_dir() and c.name != "_base"))
