// The suspects target of clrlayout's tests (issue 50): Eclipse MAT's textbook leaks, each of a size the test can
// compute — a big cache (a Dictionary of byte[]), many small holders of one type each held by a handle of its own
// (no one object dominates them: a type is the suspect), handlers piling up on a static event, a List whose
// capacity is far above its count, a storm of equal strings, and finalizable objects waiting in the queue behind
// one whose finalizer blocks.  It writes what it made to its truth file, says READY and waits; any line ends it.
// With "clean" after its two arguments it is a healthy service instead: it churns through garbage, and its live
// state is twelve parts of equal size (each its own type, held by its own static), none of which retains a tenth of
// the heap: no suspect.
#pragma warning disable 0219, 0414
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Threading;

class Component<T>
{
    public List<byte[]> Items = new List<byte[]>();

    public Component(int count, int bytes)
    {
        for (int i = 0; i < count; i++)
            Items.Add(new byte[bytes]);
    }
}

class Holder
{
    public byte[] Payload;
}

static class Publisher
{
    public static event EventHandler Changed;

    public static int Count { get { return Changed == null ? 0 : Changed.GetInvocationList().Length; } }
}

class Subscriber
{
    public byte[] State = new byte[64];

    public void OnChanged(object sender, EventArgs e)
    {
    }
}

class Finalizable
{
    public static readonly ManualResetEvent Gate = new ManualResetEvent(false);
    public static int Started;

    ~Finalizable()
    {
        Interlocked.Increment(ref Started);
        Gate.WaitOne();  // the first one run blocks the finalizer thread: the rest stay queued
    }
}

static class Program
{
    const int CacheEntries = 200, CacheBytes = 4000, Holders = 3000, HolderBytes = 100, Handlers = 500,
              SparseCapacity = 100000, SparseCount = 10, Copies = 5000, CopyLength = 50, Finalizables = 100;

    static Dictionary<string, byte[]> Cache;
    static List<object> Sparse;
    static string[] Storm;
    static readonly List<GCHandle> Handles = new List<GCHandle>();

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void MakeFinalizables()
    {
        for (int i = 0; i < Finalizables; i++)
            new Finalizable();
    }

    const int Components = 12, ComponentItems = 125, ItemBytes = 2000;

    // a healthy service's state: twelve parts of equal size, each its own type held by its own static field
    static Component<byte> C0; static Component<sbyte> C1; static Component<short> C2; static Component<ushort> C3;
    static Component<int> C4; static Component<uint> C5; static Component<long> C6; static Component<ulong> C7;
    static Component<float> C8; static Component<double> C9; static Component<char> C10; static Component<bool> C11;

    static void Clean(string truth)
    {
        long churned = 0;
        for (int round = 0; round < 200; round++)  // garbage: made, used and dropped
        {
            var batch = new List<string>();
            for (int i = 0; i < 500; i++)
                batch.Add(("request " + round + "/" + i).ToUpperInvariant());
            churned += batch.Count;
        }
        C0 = new Component<byte>(ComponentItems, ItemBytes); C1 = new Component<sbyte>(ComponentItems, ItemBytes);
        C2 = new Component<short>(ComponentItems, ItemBytes); C3 = new Component<ushort>(ComponentItems, ItemBytes);
        C4 = new Component<int>(ComponentItems, ItemBytes); C5 = new Component<uint>(ComponentItems, ItemBytes);
        C6 = new Component<long>(ComponentItems, ItemBytes); C7 = new Component<ulong>(ComponentItems, ItemBytes);
        C8 = new Component<float>(ComponentItems, ItemBytes); C9 = new Component<double>(ComponentItems, ItemBytes);
        C10 = new Component<char>(ComponentItems, ItemBytes); C11 = new Component<bool>(ComponentItems, ItemBytes);
        GC.Collect();
        File.WriteAllText(truth, "{\"clean\": true, \"components\": " + Components + ", \"component_items\": " +
            ComponentItems + ", \"item_bytes\": " + ItemBytes + ", \"churned\": " + churned + ", \"runtime\": \"" +
            Environment.Version + "\"}");
        Console.WriteLine("READY " + Process.GetCurrentProcess().Id);
        Console.ReadLine();
    }

    static void Main(string[] args)
    {
        if (args.Length > 2 && args[2] == "clean")
        {
            Clean(args[0]);
            return;
        }
        Cache = new Dictionary<string, byte[]>();
        for (int i = 0; i < CacheEntries; i++)
            Cache["entry-" + i] = new byte[CacheBytes];
        for (int i = 0; i < Holders; i++)
            Handles.Add(GCHandle.Alloc(new Holder { Payload = new byte[HolderBytes] }));
        for (int i = 0; i < Handlers; i++)
            Publisher.Changed += new Subscriber().OnChanged;
        Sparse = new List<object>(SparseCapacity);
        for (int i = 0; i < SparseCount; i++)
            Sparse.Add(new object());
        Storm = new string[Copies];
        for (int i = 0; i < Copies; i++)
            Storm[i] = new string('s', CopyLength);
        MakeFinalizables();
        GC.Collect();
        while (Volatile.Read(ref Finalizable.Started) == 0)
            Thread.Sleep(10);
        File.WriteAllText(args[0], "{\"cache_entries\": " + CacheEntries + ", \"cache_bytes\": " + CacheBytes +
            ", \"holders\": " + Holders + ", \"holder_bytes\": " + HolderBytes + ", \"handlers\": " + Publisher.Count +
            ", \"sparse_capacity\": " + Sparse.Capacity + ", \"sparse_count\": " + Sparse.Count +
            ", \"copies\": " + Copies + ", \"copy_length\": " + CopyLength + ", \"finalizables\": " + Finalizables +
            ", \"runtime\": \"" + Environment.Version + "\"}");
        Console.WriteLine("READY " + Process.GetCurrentProcess().Id);
        Console.ReadLine();
        Finalizable.Gate.Set();
        GC.KeepAlive(Cache);
        GC.KeepAlive(Sparse);
        GC.KeepAlive(Storm);
    }
}
