import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['packages/*/src/**/*.test.ts', 'packages/*/test/**/*.test.ts', 'test/**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/dist/**'],
    // Each file's own temporary folder, and a check that it leaves no process, namespace or file.
    setupFiles: ['test/support/isolation.setup.ts'],
    testTimeout: 30_000,
    hookTimeout: 30_000,
    // Process tests bind real sockets and spawn real processes; two cores, so keep it modest.
    maxWorkers: 2,
    // .ci/run asks for a JSON report to print a plain "N passed, N failed" line.
    ...(process.env.VITEST_JSON
      ? { reporters: ['default', 'json'], outputFile: { json: process.env.VITEST_JSON } }
      : {}),
  },
});
