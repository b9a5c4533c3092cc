// Loaded in the API worker only: client-node never runs on the thread that answers DNS.
import { existsSync } from 'node:fs';
import { KubeConfig } from '@kubernetes/client-node';
import { KubeConfigError, type KubeConfigSource } from './kube-config-source.js';

export { KubeConfigError, type KubeConfigSource };

const SERVICE_ACCOUNT_TOKEN = '/var/run/secrets/kubernetes.io/serviceaccount/token';

/**
 * Where the API server is, in kube-dns's order: --kubecfg-file, else KUBECONFIG, else the Pod's
 * service account; --kube-master-url overrides the server of any of them, or stands alone.
 */
export function loadKubeConfig(source: KubeConfigSource): { config: KubeConfig; from: string } {
  const config = new KubeConfig();
  let from: string;
  try {
    const file = source.kubecfgFile || source.envKubeconfig?.split(':')[0];
    if (file) {
      config.loadFromFile(file);
      from = source.kubecfgFile ? `--kubecfg-file ${file}` : `KUBECONFIG ${file}`;
    } else if (source.inCluster && existsSync(SERVICE_ACCOUNT_TOKEN)) {
      config.loadFromCluster();
      from = 'in-cluster service account';
    } else if (source.masterUrl) {
      config.loadFromOptions({
        clusters: [{ name: 'master', server: source.masterUrl, skipTLSVerify: source.masterUrl.startsWith('http:') }],
        users: [{ name: 'anonymous' }],
        contexts: [{ name: 'master', cluster: 'master', user: 'anonymous' }],
        currentContext: 'master',
      });
      return { config, from: `--kube-master-url ${source.masterUrl}` };
    } else {
      throw new KubeConfigError('no Kubernetes API configuration found', {
        hint: 'pass --kubecfg-file or --kube-master-url, set KUBECONFIG, or run in a Pod with a service account',
      });
    }
  } catch (error) {
    if (error instanceof KubeConfigError) throw error;
    throw new KubeConfigError(`cannot load the Kubernetes API configuration: ${(error as Error).message}`, {
      cause: error,
    });
  }
  if (source.context) {
    if (!config.getContextObject(source.context))
      throw new KubeConfigError(`${from} has no context ${JSON.stringify(source.context)}`);
    config.setCurrentContext(source.context);
  }
  const cluster = config.getCurrentCluster();
  if (!cluster) throw new KubeConfigError(`${from} has no current cluster`);
  if (source.masterUrl) {
    (cluster as { server: string }).server = source.masterUrl;
  }
  return { config, from };
}
