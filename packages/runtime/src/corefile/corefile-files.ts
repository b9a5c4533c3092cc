import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, isAbsolute, join, normalize } from 'node:path';

/**
 * Where a Corefile's `import`s are read from: the disk (diskFiles), or what an earlier read saw
 * (recordedFiles), so a reload can hash every file it depends on and then parse exactly that.
 */
export interface CorefileFiles {
  /** A file's text; throws (ENOENT) if there is none. */
  read(path: string): string;
  /** The paths a glob pattern matches, sorted; [] when none. */
  glob(pattern: string): string[];
  /** Whether this path is a directory (an `import` of one is refused, as caddy does). */
  isDirectory(path: string): boolean;
}

/** A glob component as a RegExp: `*` any run of characters but `/`, `?` one. */
const componentPattern = (component: string) =>
  new RegExp(
    `^${component
      .replace(/[.+^${}()|\\]/g, '\\$&')
      .replace(/\*/g, '[^/]*')
      .replace(/\?/g, '[^/]')}$`,
  );

const hasWildcard = (component: string) => /[*?]/.test(component);

/** The paths of `pattern` (absolute) that exist, component by component, as Go's filepath.Glob. */
function globOnDisk(pattern: string): string[] {
  const parts = normalize(pattern).split('/');
  let found = [parts[0] === '' ? '/' : (parts[0] as string)];
  for (const part of parts.slice(1)) {
    if (part === '') continue;
    const next: string[] = [];
    for (const base of found) {
      if (!hasWildcard(part)) {
        next.push(join(base, part));
        continue;
      }
      let entries: string[];
      try {
        entries = readdirSync(base);
      } catch {
        // An unreadable or missing folder matches nothing, as Go's Glob ignores I/O errors.
        continue;
      }
      const re = componentPattern(part);
      // Go's Glob: a leading dot is matched by `*` too; entries come sorted.
      for (const entry of entries.sort()) if (re.test(entry)) next.push(join(base, entry));
    }
    found = next;
  }
  return found.filter((path) => {
    try {
      statSync(path);
      return true;
    } catch {
      return false;
    }
  });
}

/** The disk, read as it is now. */
export const diskFiles: CorefileFiles = {
  read: (path) => readFileSync(path, 'utf8'),
  glob: (pattern) => globOnDisk(pattern),
  isDirectory: (path) => {
    try {
      return statSync(path).isDirectory();
    } catch {
      return false;
    }
  },
};

/** A record of what a read saw: each file's text and each glob's matches. */
export interface FilesSeen {
  readonly files: ReadonlyMap<string, string>;
  readonly globs: ReadonlyMap<string, readonly string[]>;
}

/** `files`, with every read and glob recorded into `seen` (what a reload then hashes). */
export function recordingFiles(files: CorefileFiles): CorefileFiles & { seen: FilesSeen } {
  const seenFiles = new Map<string, string>();
  const seenGlobs = new Map<string, readonly string[]>();
  return {
    seen: { files: seenFiles, globs: seenGlobs },
    read(path) {
      const text = files.read(path);
      seenFiles.set(path, text);
      return text;
    },
    glob(pattern) {
      const matches = files.glob(pattern);
      seenGlobs.set(pattern, matches);
      return matches;
    },
    isDirectory: (path) => files.isDirectory(path),
  };
}

/** Files as an earlier read saw them: nothing read from the disk. */
export function recordedFiles(seen: FilesSeen): CorefileFiles {
  return {
    read(path) {
      const text = seen.files.get(path);
      if (text === undefined)
        throw Object.assign(new Error(`ENOENT: no such file, open '${path}'`), { code: 'ENOENT' });
      return text;
    },
    glob: (pattern) => [...(seen.globs.get(pattern) ?? [])],
    isDirectory: () => false,
  };
}

/** A test's files by name (relative names under `/corefile`, where the Corefile itself is `/corefile/Corefile`). */
export function filesOf(byName: Readonly<Record<string, string>>, root = '/corefile'): CorefileFiles {
  const map = new Map(Object.entries(byName).map(([name, text]) => [isAbsolute(name) ? name : join(root, name), text]));
  const dirs = new Set([...map.keys()].map((p) => dirname(p)));
  return {
    read(path) {
      const text = map.get(normalize(path));
      if (text === undefined)
        throw Object.assign(new Error(`ENOENT: no such file, open '${path}'`), { code: 'ENOENT' });
      return text;
    },
    glob(pattern) {
      const dir = dirname(normalize(pattern));
      const re = componentPattern(basename(pattern));
      return [...map.keys()].filter((p) => dirname(p) === dir && re.test(basename(p))).sort();
    },
    isDirectory: (path) => dirs.has(normalize(path)),
  };
}
