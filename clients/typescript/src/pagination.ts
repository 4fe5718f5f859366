import type { UsageCall } from "./types";

/**
 * One page of GET /v1/usage, newest call first. It is also an async iterable over every call
 * from this page on: iterating fetches the following pages as it goes.
 */
export class UsagePage implements AsyncIterable<UsageCall> {
  constructor(
    /** This page's calls. */
    readonly calls: UsageCall[],
    /** The `before` of the next page; null on the last page. */
    readonly nextBefore: number | null,
    private readonly fetchPage: (before: number) => Promise<UsagePage>,
  ) {}

  hasNextPage(): boolean {
    return this.nextBefore !== null;
  }

  /** The next page, or null after the last. */
  nextPage(): Promise<UsagePage | null> {
    return this.nextBefore === null ? Promise.resolve(null) : this.fetchPage(this.nextBefore);
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<UsageCall, void, undefined> {
    // eslint-disable-next-line @typescript-eslint/no-this-alias -- the walk starts at this page and moves on
    let page: UsagePage | null = this;
    while (page) {
      yield* page.calls;
      page = await page.nextPage();
    }
  }
}

/**
 * What `client.usage()` returns: await it for the first page, or iterate it with
 * `for await` for every call across all pages.
 */
export type UsagePagePromise = Promise<UsagePage> & AsyncIterable<UsageCall>;

export function usagePagePromise(first: Promise<UsagePage>): UsagePagePromise {
  return Object.assign(first, {
    async *[Symbol.asyncIterator](): AsyncGenerator<UsageCall, void, undefined> {
      yield* await first;
    },
  });
}
