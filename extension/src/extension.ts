/** Registers the extension's parts; each lives in its own module under `host/`. */
import * as vscode from 'vscode';
import { DashboardPanel } from './host/dashboardPanel';
import { SessionWatcher, sessionsDir } from './host/discovery';
import { RunStore } from './host/runStore';
import { RunStatusBar, SHOW_COMMAND } from './host/statusBar';

export function activate(context: vscode.ExtensionContext): void {
  const output = vscode.window.createOutputChannel('OnTheFly');
  const log = (text: string): void => output.appendLine(`[${new Date().toISOString()}] ${text}`);
  const store = new RunStore({ log });
  const home = (): string => sessionsDir(vscode.workspace.getConfiguration('onthefly').get<string>('home'));
  const watcher = new SessionWatcher(home, {
    added: (session) => store.addSession(session),
    removed: (key) => store.endSession(key),
    problem: log,
  });
  context.subscriptions.push(
    output,
    store,
    watcher,
    new RunStatusBar(store),
    vscode.commands.registerCommand(SHOW_COMMAND, () =>
      DashboardPanel.createOrShow(context.extensionUri, store),
    ),
    vscode.window.registerWebviewPanelSerializer(DashboardPanel.viewType, {
      deserializeWebviewPanel: async (panel) => {
        DashboardPanel.revive(panel, context.extensionUri, store);
      },
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (event.affectsConfiguration('onthefly.home')) watcher.restart();
    }),
  );
}

export function deactivate(): void {
  // Everything is disposed through context.subscriptions.
}
