import { readFileSync } from 'node:fs';
import type { CorefileFiles } from './corefile-files.js';
import { CorefileError, type CorefileWarning, originText } from './parse.js';
import { pluginOf } from './plugin-table.js';
import { readCorefile, type ServerConfig } from './server-blocks.js';

const WHO = { forwarder: 'forwarder', 'record-builder': 'record-builder', both: 'both' } as const;

/**
 * A Corefile's plan, as an operator reads it before the switch: per server block, the plugins that
 * run in the order a query meets them (CoreDNS's, whatever order they are written in), which
 * process does each one's work, where each line came from (through which imports), and the
 * warnings (ignored plugins, deprecated options, globs that match nothing).
 */
export function corefilePlanText(blocks: readonly ServerConfig[], warnings: readonly CorefileWarning[]): string {
  const out: string[] = [];
  for (const block of blocks) {
    const keys = block.keys.map((k) => `${k.zone}:${k.port}`).join(' ');
    out.push(`server block ${keys} (${block.file}:${block.line})`);
    const width = Math.max(...block.plan.map((p) => p.name.length), 6);
    for (const step of block.plan) {
      const support = pluginOf(step.name)?.support;
      const what = step.ignored
        ? `ignored: ${step.ignored}`
        : support?.status === 'runs'
          ? `runs in the ${WHO[support.by] === 'both' ? 'forwarder and the record-builder' : WHO[support.by]}`
          : '';
      out.push(`  ${step.name.padEnd(width)}  ${originText(step.at)}  ${what}`);
    }
  }
  for (const w of warnings) out.push(`warning: ${originText(w)}: ${w.message}`);
  return `${out.join('\n')}\n`;
}

export interface ValidateOptions {
  readonly mode: 'pod' | 'node-local';
  readonly files?: CorefileFiles;
  readonly env?: Readonly<Record<string, string | undefined>>;
  readonly stdout: (text: string) => void;
  readonly stderr: (text: string) => void;
}

/** `-validate`: the plan of the Corefile in `text` (read from `source`), exit 0; or the first refused line, exit 2. */
export function validateCorefile(text: string, source: string, options: ValidateOptions): number {
  const warnings: CorefileWarning[] = [];
  try {
    const blocks = readCorefile(text, {
      source,
      mode: options.mode,
      ...(options.files ? { files: options.files } : {}),
      ...(options.env ? { env: options.env } : {}),
      onWarning: (w) => warnings.push(w),
    });
    options.stdout(corefilePlanText(blocks, warnings));
    return 0;
  } catch (error) {
    if (!(error instanceof CorefileError)) throw error;
    options.stderr(`${error.message}\n`);
    return 2;
  }
}

/** `-validate` on a Corefile file: its text read first (a file that cannot be read is exit 2 too). */
export function validateCorefileAt(
  path: string,
  mode: 'pod' | 'node-local',
  options: Omit<ValidateOptions, 'mode'>,
): number {
  let text: string;
  try {
    text = readFileSync(path, 'utf8');
  } catch (error) {
    options.stderr(`${path}: ${(error as Error).message}\n`);
    return 2;
  }
  return validateCorefile(text, path, { ...options, mode });
}
