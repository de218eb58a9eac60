// The stacks target of clrlayout's tests (issue 49): threads stopped every way a dump finds them — spinning in
// managed code, in a P/Invoke (libc's poll), waiting in the runtime (Monitor.Wait, a ManualResetEvent, Thread.Sleep,
// Thread.Join), inside a catch funclet and a finally funclet, holding a lock, and deep in generic code (a generic
// method of a generic type, with by-reference, array, pointer and nested generic parameters) — each holding
// objects only its stack references: a List<string> of 1,000 strings a frame's local holds, an array a register or
// a spilled local holds; and a list only frames an exception has unwound held (dead, though its words remain).  It writes each thread's name and managed id to its truth file, says READY and waits; any
// line ends it.  With "crash" after its two arguments, a thread throws an exception no one catches instead (a
// runtime configured to write a dump on a crash writes one); with "deep200x50", 200 threads wait 50 frames deep.
#pragma warning disable 0219, 0414
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;

struct Pair<TKey, TValue>
{
    public TKey Key;
    public TValue Value;
}

class Worker<T>
{
    public T Seed;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public unsafe int Descend<U>(int depth, ref int counter, T[] items, U extra, int* cell, Dictionary<string, List<U>> map)
    {
        counter++;
        if (depth > 0)
            return Descend(depth - 1, ref counter, items, extra, cell, map) + 1;
        lock (Program.Gate)
        {
            Program.Ready.Set();
            Monitor.Wait(Program.Gate);
        }
        return items.Length + map.Count + *cell;
    }
}

static class Program
{
    public static readonly object Gate = new object();
    public static readonly object Held = new object();
    public static readonly ManualResetEvent Ready = new ManualResetEvent(false);
    public static readonly ManualResetEvent Never = new ManualResetEvent(false);
    public static volatile bool Stop;
    public static long Spun;
    static readonly List<string> names = new List<string>();
    static readonly List<int> ids = new List<int>();
    static int started;

    [DllImport("libc", EntryPoint = "poll")]
    static extern int Poll(IntPtr fds, UIntPtr count, int timeout);

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Spin()
    {
        List<string> owned = Strings("spin", 1000);  // only this frame holds it
        long x = 1;
        Interlocked.Increment(ref started);
        while (!Stop)
            x = x * 31 + owned.Count;
        Spun = x;
        GC.KeepAlive(owned);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void InNative()
    {
        byte[] buffer = new byte[4096];
        Interlocked.Increment(ref started);
        Poll(IntPtr.Zero, UIntPtr.Zero, -1);
        GC.KeepAlive(buffer);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Throw(int depth, List<string> held)
    {
        if (depth > 0)
            Throw(depth - 1, held);
        throw new InvalidOperationException("stacks: caught " + held.Count);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void InCatch()
    {
        try
        {
            Throw(3, Strings("thrown", 5));  // only the frames the exception unwinds hold it
        }
        catch (InvalidOperationException e)
        {
            List<string> inHandler = Strings("catch", 10);
            Interlocked.Increment(ref started);
            Never.WaitOne();
            GC.KeepAlive(inHandler);
            GC.KeepAlive(e);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void InFinally()
    {
        try
        {
            Interlocked.Increment(ref started);
        }
        finally
        {
            StringBuilder inFinally = new StringBuilder("stacks: finally");
            Thread.Sleep(Timeout.Infinite);
            GC.KeepAlive(inFinally);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void HoldingLock()
    {
        lock (Held)
        {
            Interlocked.Increment(ref started);
            Never.WaitOne();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static unsafe void Generic()
    {
        int counter = 0;
        int cell = 7;
        Dictionary<string, List<long>> map = new Dictionary<string, List<long>>();
        map["stacks"] = new List<long> { 1, 2, 3 };
        new Worker<string>().Descend(12, ref counter, new[] { "a", "b" }, 42L, &cell, map);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static List<string> Strings(string prefix, int count)
    {
        List<string> list = new List<string>();
        for (int i = 0; i < count; i++)
            list.Add(prefix + ":" + i.ToString("D5"));
        return list;
    }

    static Thread Start(string name, ThreadStart body)
    {
        Thread t = new Thread(body);
        t.Name = name;
        t.IsBackground = true;
        t.Start();
        lock (names)
        {
            names.Add(name);
            ids.Add(t.ManagedThreadId);
        }
        return t;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static int Deep(int depth, object held)
    {
        if (depth > 0)
            return Deep(depth - 1, held) + 1;
        Interlocked.Increment(ref started);
        Never.WaitOne();
        return held.GetHashCode();
    }

    static void Crash()
    {
        throw new ApplicationException("stacks: unhandled");
    }

    static int Main(string[] args)
    {
        string truth = args[0];
        if (args.Length > 2 && args[2].StartsWith("deep"))
        {
            // "deepTHREADSxFRAMES": that many threads, each that many frames deep (the walk's benchmark)
            string[] shape = args[2].Substring(4).Split('x');
            int threads = int.Parse(shape[0]), frames = int.Parse(shape[1]);
            for (int i = 0; i < threads; i++)
            {
                object held = new byte[64];
                Thread t = new Thread(() => Deep(frames, held));
                t.IsBackground = true;
                t.Start();
            }
            while (Volatile.Read(ref started) < threads)
                Thread.Sleep(10);
            File.WriteAllText(truth, "{\"threads\": " + threads + ", \"frames\": " + frames + "}");
            Console.WriteLine("READY " + Process.GetCurrentProcess().Id);
            Console.ReadLine();
            return 0;
        }
        Start("spinning", Spin);
        Start("pinvoke", InNative);
        Start("catch", InCatch);
        Start("finally", InFinally);
        Start("lock", HoldingLock);
        Thread generic = Start("generic", Generic);
        Thread joiner = Start("join", () => generic.Join());
        Ready.WaitOne();
        while (Volatile.Read(ref started) < 5)
            Thread.Sleep(10);
        Thread.Sleep(200);  // each thread well inside its wait
        StringBuilder json = new StringBuilder("{\"threads\": [");
        for (int i = 0; i < names.Count; i++)
            json.Append(i == 0 ? "" : ", ").Append("{\"name\": \"").Append(names[i]).Append("\", \"managed_id\": ")
                .Append(ids[i]).Append("}");
        json.Append("], \"main_managed_id\": ").Append(Thread.CurrentThread.ManagedThreadId).Append("}");
        File.WriteAllText(truth, json.ToString());
        if (args.Length > 2 && args[2] == "crash")
        {
            Thread crash = new Thread(Crash);
            crash.Name = "crash";
            crash.Start();
            crash.Join();
            return 1;
        }
        List<string> mainOwned = Strings("main", 100);  // before READY: the dump finds this thread waiting
        Console.WriteLine("READY " + Process.GetCurrentProcess().Id);
        Console.ReadLine();
        GC.KeepAlive(mainOwned);
        Stop = true;
        return 0;
    }
}
