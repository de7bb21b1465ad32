#!/usr/bin/env python3
"""Every relative link in README.md and docs/*.md resolves.

A markdown link `[text](path)` or `[text](path#anchor)` (images too) whose target is not a URL must name a
file or folder that exists, relative to the file that holds the link; `#anchor` must be an anchor that a
heading of the target file produces under GitHub's rules (the heading's text as rendered, lowercased;
every character but letters, digits, spaces, '-' and '_' dropped; spaces turned into '-'; a repeated anchor
gets -1, -2, ...). A bare `#anchor` names a heading of the same file. Links inside code (fenced blocks and
inline spans) are text, not links.

  check_links.py ROOT             check ROOT/README.md and ROOT/docs/*.md
  check_links.py --files F...     check these files
  check_links.py --self-test      show that a broken file and a broken anchor are both caught

Exit 0: every link resolves; 1: one line per broken link (file:line: target: why); 2: bad usage.
"""
import os
import re
import sys
import tempfile

FENCE = re.compile(r'^\s*(```|~~~)')
HEADING = re.compile(r'^ {0,3}(#{1,6})\s+(.*?)\s*#*\s*$')
INLINE_CODE = re.compile(r'`[^`\n]*`')
LINK = re.compile(r'!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\(\s*<?([^)\s>]*)>?(?:\s+"[^"]*")?\s*\)')
URL = re.compile(r'^[a-zA-Z][a-zA-Z0-9+.-]*:')


def strip_fences(text):
    """The text with every fenced code block blanked (line numbers kept)."""
    out, fenced = [], False
    for line in text.split('\n'):
        if FENCE.match(line):
            fenced = not fenced
            out.append('')
        else:
            out.append('' if fenced else line)
    return out


def slug(heading):
    """GitHub's anchor for a heading's markdown text."""
    text = re.sub(r'!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\([^)]*\)', r'\1', heading)  # a link: its text
    text = re.sub(r'<[^>]*>', '', text)  # inline HTML
    text = text.replace('`', '').replace('*', '')
    text = text.lower()
    text = ''.join(c for c in text if c.isalnum() or c in ' -_')
    return text.replace(' ', '-')


def anchors(path, cache={}):
    if path not in cache:
        seen, result = {}, set()
        with open(path, encoding='utf-8') as f:
            for line in strip_fences(f.read()):
                m = HEADING.match(line)
                if not m:
                    continue
                base = slug(m.group(2))
                n = seen.get(base, 0)
                seen[base] = n + 1
                result.add(base if n == 0 else '%s-%d' % (base, n))
        cache[path] = result
    return cache[path]


def links(path):
    """(line, target) of every link of the file outside code."""
    with open(path, encoding='utf-8') as f:
        lines = strip_fences(f.read())
    text = INLINE_CODE.sub(lambda m: ' ' * len(m.group(0)), '\n'.join(lines))
    for m in LINK.finditer(text):
        yield text.count('\n', 0, m.start()) + 1, m.group(2)


def check(files):
    broken = []
    for path in files:
        for line, target in links(path):
            if not target or URL.match(target):
                continue
            file_part, _, anchor = target.partition('#')
            dest = os.path.normpath(os.path.join(os.path.dirname(path), file_part)) if file_part else path
            where = '%s:%d: %s' % (path, line, target)
            if not os.path.exists(dest):
                broken.append('%s: no such file %s' % (where, dest))
            elif anchor:
                if not dest.endswith('.md') or os.path.isdir(dest):
                    broken.append('%s: an anchor into %s, which is not a markdown file' % (where, dest))
                elif anchor not in anchors(dest):
                    broken.append('%s: no heading of %s has the anchor #%s' % (where, dest, anchor))
    return broken


def self_test():
    with tempfile.TemporaryDirectory() as d:
        os.mkdir(os.path.join(d, 'docs'))

        def write(name, text):
            with open(os.path.join(d, name), 'w', encoding='utf-8') as f:
                f.write(text)

        write('docs/a.md', '# Title\n\n## `serve`: the extender (whole jobs)\n\n## Node-level choice (`topology::choose`)\n\n'
              '## Dup\n\n## Dup\n\n```\n## Not a heading\n```\n')
        write('README.md', '[a](docs/a.md) [b](docs/a.md#serve-the-extender-whole-jobs) '
              '[c](docs/a.md#node-level-choice-topologychoose)\n[d](docs/a.md#dup-1) [e](#top) '
              '[f](https://example.com/x#y) `[g](nowhere.md)`\n\n# Top\n\n```\n[h](nowhere.md)\n```\n')
        good = check([os.path.join(d, 'README.md'), os.path.join(d, 'docs/a.md')])
        if good:
            print('self-test: valid links reported broken:\n' + '\n'.join(good))
            return 1
        cases = {'docs/missing.md': 'no such file', 'docs/a.md#not-a-heading': 'no heading',
                 'docs/a.md#dup-2': 'no heading', '#nowhere': 'no heading', 'docs/a.md#serve': 'no heading'}
        for target, why in cases.items():
            write('README.md', 'Text\nmore [a broken\nlink](%s) here\n' % target)
            found = check([os.path.join(d, 'README.md')])
            if len(found) != 1 or why not in found[0] or ':2: ' not in found[0]:
                print('self-test: [..](%s) gave %r, expected one line with %r at line 2' % (target, found, why))
                return 1
    print('self-test: ok')
    return 0


def main(argv):
    if argv[1:] == ['--self-test']:
        return self_test()
    if len(argv) >= 3 and argv[1] == '--files':
        files = argv[2:]
    elif len(argv) == 2 and not argv[1].startswith('-'):
        docs = os.path.join(argv[1], 'docs')
        files = [os.path.join(argv[1], 'README.md')] + sorted(
            os.path.join(docs, n) for n in os.listdir(docs) if n.endswith('.md'))
    else:
        print(__doc__.strip().split('\n\n')[-2], file=sys.stderr)
        return 2
    broken = check(files)
    for b in broken:
        print(b)
    if broken:
        print('%d broken link(s) in %d file(s)' % (len(broken), len(files)))
        return 1
    print('%d file(s): every relative link resolves' % len(files))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv))
