import { ClusterDnsError } from '@cluster-dns/runtime';

/** No usable Kubernetes API configuration; startup exits 1 with the hint. */
export class KubeConfigError extends ClusterDnsError {
  constructor(message: string, options: { cause?: unknown; hint?: string } = {}) {
    super('KUBECONFIG_INVALID', message, options);
  }
}

/** Where the API configuration comes from, in kube-dns's order (see kube-config.ts). */
export interface KubeConfigSource {
  kubecfgFile: string;
  masterUrl: string;
  /** KUBECONFIG from the environment, passed in by main.ts. */
  envKubeconfig: string | undefined;
  /** KUBERNETES_SERVICE_HOST from the environment: set inside a Pod. */
  inCluster: boolean;
  /** The kubeconfig's context to use (a Corefile's `kubeconfig FILE CONTEXT`); its current one when unset. */
  context?: string;
}
