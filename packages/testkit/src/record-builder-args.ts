/**
 * The record-builder's flags for a test or a bench run: on `kubeconfig`'s API, every port free on
 * loopback, no lameduck; `extra` after them (a later flag wins).
 */
export function localRecordBuilderArgs(kubeconfig: string, extra: readonly string[] = []): string[] {
  return [
    `--kubecfg-file=${kubeconfig}`,
    '--dns-bind-address=127.0.0.1',
    '--dns-port=0',
    '--healthz-bind-address=127.0.0.1',
    '--healthz-port=0',
    '--metrics-port=0',
    '--lameduck=0s',
    ...extra,
  ];
}
