import dgram from 'node:dgram';
import net from 'node:net';

/** A port free on loopback for both UDP and TCP now (for a process another must be told about before it starts: the forwarder a record-builder NOTIFYs). */
export async function freePort(host = '127.0.0.1'): Promise<number> {
  for (;;) {
    const tcp = net.createServer();
    await new Promise<void>((resolve) => tcp.listen(0, host, resolve));
    const port = (tcp.address() as net.AddressInfo).port;
    const udp = dgram.createSocket('udp4');
    const free = await new Promise<boolean>((resolve) => {
      udp.once('error', () => resolve(false));
      udp.bind(port, host, () => resolve(true));
    });
    udp.close();
    await new Promise<void>((resolve) => tcp.close(() => resolve()));
    if (free) return port;
  }
}
