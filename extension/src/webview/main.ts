/** Entry of the dashboard page: pick the transport for where the page runs, start the app. */
import 'uplot/dist/uPlot.min.css';
import './app.css';
import { App } from './app';
import { SocketTransport } from './socketTransport';
import type { Transport } from './transport';
import { VsCodeTransport, type VsCodeApi } from './vscodeTransport';

declare const acquireVsCodeApi: (() => VsCodeApi) | undefined;

function transport(): Transport {
  // Only a VS Code webview defines acquireVsCodeApi; a browser tab talks to the server itself.
  return typeof acquireVsCodeApi === 'function'
    ? new VsCodeTransport(acquireVsCodeApi())
    : new SocketTransport(window.location);
}

const root = document.getElementById('app');
if (root) new App(root, transport()).start();
