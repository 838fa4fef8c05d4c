/** A small base for objects that own resources: disposing them disposes what they own. */

export interface DisposableLike {
  dispose(): unknown;
}

export abstract class Disposable implements DisposableLike {
  private readonly owned: DisposableLike[] = [];
  private disposedFlag = false;

  protected get isDisposed(): boolean {
    return this.disposedFlag;
  }

  /** Own `item`: it is disposed with this object (at once if this one is already gone). */
  protected register<T extends DisposableLike>(item: T): T {
    if (this.disposedFlag) item.dispose();
    else this.owned.push(item);
    return item;
  }

  dispose(): void {
    if (this.disposedFlag) return;
    this.disposedFlag = true;
    // Last in, first out: later resources may depend on earlier ones.
    while (this.owned.length) this.owned.pop()?.dispose();
  }
}

/** Wrap a plain clean-up function. */
export function toDisposable(dispose: () => void): DisposableLike {
  return { dispose };
}
