// Target program for clrlayout's sample dumps.
//
// It allocates a known set of System.String objects, puts some object headers into known states, and
// writes what the runtime itself says about them (addresses, MethodTable, raw bytes read with
// Marshal.ReadByte, header word) to a JSON "truth" file.  Then it prints "READY <pid>" and waits on stdin
// while a dump of it is written.  clrlayout's tests compare what they decode from the dump with this file.
//
// Compiled with Debian's Mono C# compiler and run by CoreCLR (see sample_dumps/make_dumps.py):
//   mcs -unsafe -target:exe -out:strings.dll Program.cs ../common/TargetRuntime.cs
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text;
using System.Threading;

// Run inside another .NET app -- a single-file app, whose runtime is linked into its executable -- as a
// startup hook: DOTNET_STARTUP_HOOKS=/path/strings.dll, with the arguments in CLRLAYOUT_TRUTH and
// CLRLAYOUT_STALE.  The app's own Main never runs: the process leaves once the dump is written.
internal class StartupHook
{
    public static void Initialize()
    {
        Program.Main(new[] { Environment.GetEnvironmentVariable("CLRLAYOUT_TRUTH") ?? "truth.json",
                             Environment.GetEnvironmentVariable("CLRLAYOUT_STALE") ?? "1000" });
        Environment.Exit(0);
    }
}

static class Program
{
    // Keeps every known string reachable (and so alive) until the process ends.
    static readonly List<object> Keep = new List<object>();
    static readonly List<GCHandle> Pins = new List<GCHandle>();
    static readonly List<GCHandle> SurvivorPins = new List<GCHandle>();

    static unsafe long AddressOf(object o)
    {
        // A TypedReference holds a pointer to the variable, which holds the object reference.
        TypedReference tr = __makeref(o);
        return (long)**(IntPtr**)(&tr);
    }

    static string Fresh(string s)
    {
        // A new object with the same characters (literals are interned and would be shared).
        return new string(s.ToCharArray());
    }

    internal static void Main(string[] args)
    {
        string truthPath = args.Length > 0 ? args[0] : "truth.json";
        int staleCount = args.Length > 1 ? int.Parse(args[1]) : 1000;
        int ptr = IntPtr.Size;

        // 1. Stale bytes: strings that die before a GC, between pinned survivors.  Each run of dead strings
        //    between two survivors becomes one free object, whose payload still holds the dead strings'
        //    bytes: a naive "MethodTable pointer" scan reports them, a heap walk steps over them.
        List<long> staleAddresses = MakeGarbage(staleCount);
        GC.Collect(2, GCCollectionMode.Forced, true, false);
        GC.WaitForPendingFinalizers();
        GC.Collect(2, GCCollectionMode.Forced, true, false);

        // 2. The known strings, allocated after the last GC and pinned so that they stay where they are.
        var known = new List<KeyValuePair<string, string>>();   // (name, value)
        var objects = new List<string>();
        Action<string, string> add = (name, value) => { known.Add(new KeyValuePair<string, string>(name, value)); objects.Add(value); };

        add("empty", string.Empty);
        add("literal", "interned literal from the IL string table");
        for (int n = 0; n <= 9; n++) add("len" + n, new string('x', n));
        add("b", Fresh("b"));
        add("cc", Fresh("cc"));
        add("ddd", Fresh("ddd"));
        add("latin1", Fresh("Gr\u00fc\u00dfe aus K\u00f6ln"));
        add("cyrillic", Fresh("\u041f\u0440\u0438\u0432\u0435\u0442, \u043c\u0438\u0440"));
        add("cjk", Fresh("\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8"));
        add("surrogate_pair", Fresh("emoji \ud83d\ude00 pair"));
        add("lone_high", Fresh("lone \ud800 high"));
        add("lone_low", Fresh("\udc00 lone low"));
        add("embedded_nul", Fresh("nul\u0000inside\u0000"));
        add("large", new string('L', 50000));          // 100,022 bytes: large object heap
        for (int i = 0; i < 4; i++) add("dup4_" + i, Fresh("duplicate value seen four times"));
        for (int i = 0; i < 3; i++) add("dup3_" + i, Fresh("dup x3"));
        add("thin_lock", Fresh("held with Monitor.Enter"));
        add("nested_lock", Fresh("entered twice"));
        add("hashed", Fresh("identity hash taken"));
        add("hash_then_lock", Fresh("hashed, then locked"));
        add("released", Fresh("locked, then released"));

        foreach (var o in objects) { Keep.Add(o); Pins.Add(GCHandle.Alloc(o, GCHandleType.Pinned)); }

        var expectHeader = new Dictionary<string, string>();
        int hashOfHashed = RuntimeHelpers.GetHashCode(Find(known, "hashed"));
        expectHeader["hashed"] = "hash";
        Monitor.Enter(Find(known, "thin_lock")); expectHeader["thin_lock"] = "thin_lock:1";
        Monitor.Enter(Find(known, "nested_lock")); Monitor.Enter(Find(known, "nested_lock")); expectHeader["nested_lock"] = "thin_lock:2";
        RuntimeHelpers.GetHashCode(Find(known, "hash_then_lock")); Monitor.Enter(Find(known, "hash_then_lock")); expectHeader["hash_then_lock"] = "sync_block";
        Monitor.Enter(Find(known, "released")); Monitor.Exit(Find(known, "released")); expectHeader["released"] = "none";
        foreach (var name in new[] { "b", "cc", "ddd" }) { Monitor.Enter(Find(known, name)); expectHeader[name] = "thin_lock:1"; }

        // 3. Dead strings: unreachable but not yet collected.  They are heap objects, which SOS lists too.
        var deadAddresses = new List<long>();
        for (int i = 0; i < 100; i++) deadAddresses.Add(AddressOf("DEAD-" + i.ToString("D3")));

        // 4. The truth file, written line by line (a single big string would fill the heap being dumped).
        var truth = new StreamWriter(truthPath, false, new UTF8Encoding(false));
        truth.Write("{\n");
        truth.Write("  \"runtime_version\": \"{0}\",\n", TargetRuntime.Version());
        truth.Write("  \"os_version\": \"{0}\",\n", Environment.OSVersion.ToString().Replace("\\", "/").Replace("\"", "'"));
        truth.Write("  \"pid\": {0},\n", Process.GetCurrentProcess().Id);
        truth.Write("  \"pointer_size\": {0},\n", ptr);
        truth.Write("  \"offset_to_string_data\": {0},\n", RuntimeHelpers.OffsetToStringData);
        truth.Write("  \"string_method_table\": \"0x{0:x}\",\n", typeof(string).TypeHandle.Value.ToInt64());
        truth.Write("  \"managed_thread_id\": {0},\n", Environment.CurrentManagedThreadId);
        truth.Write("  \"hash_of_hashed\": {0},\n", hashOfHashed);
        truth.Write("  \"server_gc\": {0},\n", System.Runtime.GCSettings.IsServerGC ? "true" : "false");
        truth.Write("  \"strings\": [\n");
        for (int i = 0; i < known.Count; i++)
        {
            string name = known[i].Key, value = known[i].Value;
            long address = AddressOf(value);
            long pinned = Pins[i].AddrOfPinnedObject().ToInt64() - RuntimeHelpers.OffsetToStringData;
            if (pinned != address) throw new Exception("address mismatch for " + name);
            int window = Math.Min(ptr + RuntimeHelpers.OffsetToStringData + 2 * value.Length + 2 + 16, 256);
            var bytes = new StringBuilder();
            for (int k = 0; k < window; k++) bytes.AppendFormat("{0:x2}", Marshal.ReadByte(new IntPtr(address - ptr + k)));
            int header = Marshal.ReadInt32(new IntPtr(address - 4));
            string expect;
            if (!expectHeader.TryGetValue(name, out expect)) expect = "";
            truth.Write("    {{\"name\": \"{0}\", \"address\": \"0x{1:x}\", \"length\": {2}, \"header\": {3}, \"expect_header\": \"{4}\", \"units\": [",
                name, address, value.Length, (uint)header, expect);
            for (int k = 0; k < value.Length; k++) { if (k > 0) truth.Write(','); WriteInt(truth, value[k]); }
            truth.Write("], \"bytes_at\": \"0x{0:x}\", \"bytes\": \"{1}\"}}{2}\n", address - ptr, bytes, i + 1 < known.Count ? "," : "");
        }
        truth.Write("  ],\n");
        truth.Write("  \"dead_addresses\": [");
        WriteList(truth, deadAddresses);
        truth.Write("],\n  \"stale_addresses\": [");
        WriteList(truth, staleAddresses);
        truth.Write("]\n");
        truth.Write("}\n");
        truth.Close();

        Console.WriteLine("READY " + Process.GetCurrentProcess().Id);
        Console.Out.Flush();
        Console.ReadLine();
        GC.KeepAlive(Keep);
    }

    // In its own frame so that no stack slot of Main keeps the strings alive (tier-0 code keeps locals
    // alive until the method returns).
    // Every 8th string survives, pinned so that the GC cannot slide it over the dead ones; the others die.
    [MethodImpl(MethodImplOptions.NoInlining)]
    static List<long> MakeGarbage(int count)
    {
        var stale = new List<string>();
        var addresses = new List<long>();
        for (int i = 0; i < count; i++)
        {
            if (i % 8 == 0) stale.Add("KEEP-" + i.ToString("D5") + "-" + new string('k', i % 23));
            else stale.Add("STALE-" + i.ToString("D5") + "-" + new string('s', i % 23));
        }
        foreach (var s in stale)
        {
            if (s.StartsWith("KEEP-")) { Keep.Add(s); SurvivorPins.Add(GCHandle.Alloc(s, GCHandleType.Pinned)); }
            else addresses.Add(AddressOf(s));
        }
        return addresses;
    }

    static string Find(List<KeyValuePair<string, string>> known, string name)
    {
        foreach (var kv in known) if (kv.Key == name) return kv.Value;
        throw new KeyNotFoundException(name);
    }

    // Digits one char at a time: int.ToString would leave a garbage string per call on the heap being dumped.
    static void WriteInt(StreamWriter w, int n)
    {
        if (n >= 10) WriteInt(w, n / 10);
        w.Write((char)('0' + n % 10));
    }

    static void WriteList(StreamWriter w, List<long> values)
    {
        for (int i = 0; i < values.Count; i++) w.Write("{0}\"0x{1:x}\"", i > 0 ? ", " : "", values[i]);
    }
}
